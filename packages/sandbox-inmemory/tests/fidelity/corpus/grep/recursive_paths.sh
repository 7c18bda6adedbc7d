mkdir -p src/sub
echo 'TODO x' > src/a.txt
echo 'TODO y' > src/sub/b.txt
echo none > src/c.txt
grep -r TODO src | sort
