a=(a b c d e)
echo "${a[@]:1:3}"
