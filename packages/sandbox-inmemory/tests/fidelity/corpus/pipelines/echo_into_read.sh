echo v | read x
echo "[$x]"
