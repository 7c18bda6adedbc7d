declare -i n=5
n=n+3
echo "$n"
n+=2
echo "$n"
