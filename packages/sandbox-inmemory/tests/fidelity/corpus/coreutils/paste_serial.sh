seq 5 | paste -sd,
seq 4 | paste - -
