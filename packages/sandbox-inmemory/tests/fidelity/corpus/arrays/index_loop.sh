a=(p q r)
for i in "${!a[@]}"; do
  echo "$i:${a[$i]}"
done
