echo a | grep b
echo "rc=$?"
