seq 10 | grep -A1 -B1 5
