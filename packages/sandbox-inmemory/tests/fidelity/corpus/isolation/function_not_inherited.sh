f() { echo f; }
bash -c 'f' 2>/dev/null
echo "rc=$?"
