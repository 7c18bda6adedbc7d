printf 'x 1\ny 2\nx 3\n' | awk '{s[$1] += $2} END {for (k in s) print k, s[k]}' | sort
