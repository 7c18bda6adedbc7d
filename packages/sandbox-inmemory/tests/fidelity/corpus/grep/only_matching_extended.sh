echo 'x=1 y=2' | grep -oE '[a-z]=[0-9]'
