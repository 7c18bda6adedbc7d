d=$(mktemp -d)
touch "$d/x"
ls "$d"
rm -r "$d"
