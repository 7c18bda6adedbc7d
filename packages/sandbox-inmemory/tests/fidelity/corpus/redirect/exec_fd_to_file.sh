exec 3> log
echo one >&3
echo two >&3
exec 3>&-
cat log
