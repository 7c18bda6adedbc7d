bash nope.sh
echo "rc=$?"
