((0))
echo $?
((5))
echo $?
