! true
echo $?
! false
echo $?
