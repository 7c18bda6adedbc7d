a=(a b c)
unset 'a[1]'
echo "${#a[@]} ${a[*]} ${!a[*]}"
