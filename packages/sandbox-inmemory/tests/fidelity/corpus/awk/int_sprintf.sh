awk 'BEGIN {print int(7.9), sprintf("%05.1f", 3.14159)}'
