echo -n a
echo -e 'b\tc'
echo -- -n
echo -E 'x\ty'
