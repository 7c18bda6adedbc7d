i=0
((i++))
((++i))
echo "$i"
((i += 5))
echo "$i"
