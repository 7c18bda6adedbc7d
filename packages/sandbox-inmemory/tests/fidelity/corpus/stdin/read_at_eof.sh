read -r x
echo "status $? [$x]"
