echo a > f1
echo a > f2
grep a f1 f2
grep -h a f1 f2
