n=0
printf 'a\nb\n' | while read -r _; do
  n=$((n + 1))
done
echo "$n"
