awk 'BEGIN {a[1]; a[2]; delete a[1]; print length(a)}'
