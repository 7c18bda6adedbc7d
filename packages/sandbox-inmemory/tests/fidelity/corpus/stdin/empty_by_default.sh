cat
echo "rc=$?"
