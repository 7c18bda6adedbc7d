true | false
echo $?
