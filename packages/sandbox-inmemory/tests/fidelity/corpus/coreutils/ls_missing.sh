ls nope
echo "rc=$?"
