seq 10 | head -3
seq 10 | tail -2
seq 10 | tail -n +9
seq 10 | head -n -8
