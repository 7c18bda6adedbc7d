f=$(mktemp)
echo data > "$f"
cat "$f"
[ -f "$f" ] && echo exists
rm "$f"
