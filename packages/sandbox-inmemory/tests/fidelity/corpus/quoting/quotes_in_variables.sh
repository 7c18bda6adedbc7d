q="it's"
echo "$q"
echo '"quoted"'
d='a "b" c'
echo "$d"
