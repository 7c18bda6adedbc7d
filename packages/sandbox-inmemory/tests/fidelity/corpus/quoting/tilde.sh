echo ~
echo "~"
echo ~/x
