IFS=:
v=a:b:c
for x in $v; do
  echo "$x"
done
