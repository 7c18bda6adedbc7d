a=(a b c d)
i=1
echo "${a[i+1]} ${a[$i]}"
