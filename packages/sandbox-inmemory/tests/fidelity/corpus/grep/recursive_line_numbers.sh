mkdir src
printf 'a\nTODO\n' > src/f.txt
grep -rn TODO src
