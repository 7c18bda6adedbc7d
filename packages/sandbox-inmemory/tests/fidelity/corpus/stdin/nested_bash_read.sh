bash -c 'read -r a; echo "got $a"'
