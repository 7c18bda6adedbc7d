seq 12 | grep 1 | sort -r | head -2
