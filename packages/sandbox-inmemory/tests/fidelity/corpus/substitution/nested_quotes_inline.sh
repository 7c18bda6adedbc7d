x="$(echo "a b" | tr ' ' '-')"
echo "$x"
