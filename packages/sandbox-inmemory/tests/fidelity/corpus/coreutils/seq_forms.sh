seq 3
seq 2 2 8
seq -s, 5
seq -w 8 10
