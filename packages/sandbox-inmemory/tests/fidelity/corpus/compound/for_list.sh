for f in alpha beta gamma; do
  echo "item: $f"
done
