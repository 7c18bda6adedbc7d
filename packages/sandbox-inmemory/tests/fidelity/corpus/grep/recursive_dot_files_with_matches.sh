mkdir -p src/sub
echo 'TODO x' > src/a.txt
echo 'TODO y' > src/sub/b.txt
grep -rl TODO . | sort
