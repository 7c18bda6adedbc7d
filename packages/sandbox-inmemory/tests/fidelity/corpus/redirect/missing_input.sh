cat < missing.txt
echo "rc=$?"
