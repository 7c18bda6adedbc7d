mkdir sub
touch top.txt sub/deep.txt
find . -maxdepth 1 -type f
