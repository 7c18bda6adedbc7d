./plain.sh
echo "rc=$?"
