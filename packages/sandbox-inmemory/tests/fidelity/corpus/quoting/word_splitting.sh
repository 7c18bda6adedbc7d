v="a  b   c"
printf '[%s]\n' $v
printf '[%s]\n' "$v"
