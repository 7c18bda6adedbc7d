n=3
until [ $n -eq 0 ]; do
  echo "$n"
  n=$((n - 1))
done
echo liftoff
