awk 'BEGIN {i = 0; while ((i + 1) < 5) i++; print i}'
