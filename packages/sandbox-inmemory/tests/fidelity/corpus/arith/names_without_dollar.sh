x=4
echo $((x * x + y))
