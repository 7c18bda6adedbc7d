bash scripts/init.sh app > /dev/null
bash scripts/init.sh app
echo "rc=$?"
