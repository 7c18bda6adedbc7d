./run.sh
echo "rc=$?"
