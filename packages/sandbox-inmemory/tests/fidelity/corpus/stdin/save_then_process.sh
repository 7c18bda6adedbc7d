cat > in.txt
wc -l < in.txt
sort in.txt
