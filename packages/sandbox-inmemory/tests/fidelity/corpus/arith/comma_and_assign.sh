echo $((a = 2, b = a * 3, a + b))
echo "$a $b"
