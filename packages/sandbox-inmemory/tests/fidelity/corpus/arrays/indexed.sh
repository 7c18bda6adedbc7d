a=(x y z)
echo "${a[1]} ${#a[@]} ${a[@]}"
