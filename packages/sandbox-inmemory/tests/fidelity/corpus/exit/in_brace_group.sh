{ echo a; exit 2; }
echo b
