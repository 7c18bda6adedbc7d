echo "${c:=set}"
echo "$c"
