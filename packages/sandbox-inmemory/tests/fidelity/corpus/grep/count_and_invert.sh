printf 'a\nb\na\n' | grep -c a
printf 'a\nb\n' | grep -v a
