printf 'abcdef' | head -c 3
echo
printf 'abcdef' | tail -c 2
echo
