seq 5 | xargs -n2 echo
