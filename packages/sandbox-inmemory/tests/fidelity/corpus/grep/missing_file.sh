grep x missing.txt
echo "rc=$?"
