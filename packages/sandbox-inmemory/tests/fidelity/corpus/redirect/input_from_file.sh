printf 'x\ny\n' > in
wc -l < in
