set -e
i=0
while [ $i -lt 2 ]; do
  i=$((i + 1))
done
echo "i=$i"
