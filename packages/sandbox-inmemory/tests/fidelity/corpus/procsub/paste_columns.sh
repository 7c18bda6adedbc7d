paste <(seq 3) <(seq 4 6)
