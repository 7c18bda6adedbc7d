echo 'a b c' | awk 'BEGIN {OFS = "-"} {$1 = $1; print}'
