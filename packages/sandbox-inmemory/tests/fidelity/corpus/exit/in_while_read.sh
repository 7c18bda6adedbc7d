while read -r line; do
  if [ "$line" = quit ]; then
    echo bye
    exit 7
  fi
  echo "got $line"
done
echo never
