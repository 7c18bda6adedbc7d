ls nope 2>/dev/null
echo "rc=$?"
