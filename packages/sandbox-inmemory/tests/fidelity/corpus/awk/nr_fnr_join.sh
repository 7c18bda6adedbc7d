printf '1 one\n2 two\n' > a
printf '2\n1\n3\n' > b
awk 'NR == FNR {m[$1] = $2; next} {print $1, ($1 in m ? m[$1] : "none")}' a b
