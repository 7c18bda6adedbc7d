ls nope | wc -l
echo "rc=$?"
