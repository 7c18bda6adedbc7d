awk 'BEGIN {printf "%-5s|%5.2f|%d\n", "ab", 3.14159, 42}'
