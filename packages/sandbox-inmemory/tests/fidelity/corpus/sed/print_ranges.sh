seq 10 | sed -n '3,5p'
seq 10 | sed -n '/8/,$p'
