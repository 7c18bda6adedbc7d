let "x = 3 * 4"
echo "$x"
