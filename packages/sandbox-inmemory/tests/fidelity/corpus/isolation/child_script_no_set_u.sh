set -u
bash child.sh
echo "rc=$?"
