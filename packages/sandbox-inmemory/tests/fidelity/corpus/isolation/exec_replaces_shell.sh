echo before
exec echo replaced
echo never
