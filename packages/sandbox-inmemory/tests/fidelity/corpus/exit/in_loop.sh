for i in 1 2 3; do
  echo "$i"
  [ "$i" = 2 ] && exit 0
done
echo never
