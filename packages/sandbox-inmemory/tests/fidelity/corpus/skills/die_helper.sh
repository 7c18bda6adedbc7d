bash run.sh
echo "rc=$?"
