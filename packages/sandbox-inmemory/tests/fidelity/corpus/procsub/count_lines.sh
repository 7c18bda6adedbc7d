wc -l < <(seq 5)
