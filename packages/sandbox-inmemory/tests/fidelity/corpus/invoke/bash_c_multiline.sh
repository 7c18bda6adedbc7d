bash -c 'for i in 1 2; do
  echo "i=$i"
done
echo last'
