printf '10\n9\n2\n' | sort
printf '10\n9\n2\n' | sort -n
printf '10\n9\n2\n' | sort -rn
