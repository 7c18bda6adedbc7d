v=val
echo 'a $v' "b $v" "c \$v" 'd "q"' "e 'q'"
