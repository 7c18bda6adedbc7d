x=$(y=5; echo "$y")
echo "[$x] [$y]"
