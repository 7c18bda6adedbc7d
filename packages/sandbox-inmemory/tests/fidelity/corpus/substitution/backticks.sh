x=`echo hi`
echo "$x `echo there`"
