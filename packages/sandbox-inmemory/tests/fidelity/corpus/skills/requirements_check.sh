bash check.sh
echo "rc=$?"
