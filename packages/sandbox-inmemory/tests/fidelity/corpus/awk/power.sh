awk 'BEGIN {print 2^10, 3^2^2}'
