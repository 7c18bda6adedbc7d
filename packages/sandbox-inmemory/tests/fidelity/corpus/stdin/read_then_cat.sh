read -r first
echo "first=$first"
cat
