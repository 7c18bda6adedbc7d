bash s.sh
echo "rc=$?"
