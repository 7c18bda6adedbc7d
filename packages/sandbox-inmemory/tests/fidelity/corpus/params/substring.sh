s=abcdef
echo "${s:1:3} ${s: -2} ${s:2}"
