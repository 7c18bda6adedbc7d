awk -v n=3 'BEGIN {for (i = 1; i <= n; i++) printf "%d ", i * i; print ""}'
