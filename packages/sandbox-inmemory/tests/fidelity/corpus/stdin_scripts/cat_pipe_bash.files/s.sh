for i in 1 2 3; do
  echo "n$i"
done
exit 4
