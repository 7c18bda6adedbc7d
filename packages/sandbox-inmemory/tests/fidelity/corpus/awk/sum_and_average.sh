seq 5 | awk '{s += $1} END {print s, NR, s / NR}'
