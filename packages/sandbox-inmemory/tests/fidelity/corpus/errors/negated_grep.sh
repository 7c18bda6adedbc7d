! grep -q x <<< y
echo $?
