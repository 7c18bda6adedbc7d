seq 10 | sed 3q
