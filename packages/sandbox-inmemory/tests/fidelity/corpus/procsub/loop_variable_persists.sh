n=0
while read -r _; do
  n=$((n + 1))
done < <(seq 3)
echo "$n"
