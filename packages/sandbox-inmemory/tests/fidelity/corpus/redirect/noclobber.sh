set -C
echo a > f
echo b > f
echo "rc=$?"
cat f
