bash -c 'exit 7'
echo "rc=$?"
