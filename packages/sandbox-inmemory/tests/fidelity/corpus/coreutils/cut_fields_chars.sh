echo 'a:b:c:d' | cut -d: -f2,4
echo abcdef | cut -c2-4
printf 'x\ty\n' | cut -f2
