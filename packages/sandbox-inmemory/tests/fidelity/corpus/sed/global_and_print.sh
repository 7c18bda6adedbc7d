printf 'a-b-c\nxyz\n' | sed -n 's/-/+/gp'
