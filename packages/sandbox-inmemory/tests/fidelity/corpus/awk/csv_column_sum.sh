printf 'name,amount\na,3\nb,4\n' | awk -F, 'NR > 1 {t += $2} END {print "total", t}'
