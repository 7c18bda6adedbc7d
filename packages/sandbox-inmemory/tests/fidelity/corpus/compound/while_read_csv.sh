while IFS=, read -r name count; do
  echo "$name has $count"
done < data.csv
