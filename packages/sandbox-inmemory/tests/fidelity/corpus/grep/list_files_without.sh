echo yes > a
echo no > b
grep -L yes a b
