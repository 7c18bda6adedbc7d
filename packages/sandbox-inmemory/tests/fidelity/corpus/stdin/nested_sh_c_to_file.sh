sh -c 'cat > x.txt'
cat x.txt
