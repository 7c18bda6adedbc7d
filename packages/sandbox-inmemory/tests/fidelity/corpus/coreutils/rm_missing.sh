rm nope
echo "rc=$?"
rm -f nope
echo "rc=$?"
