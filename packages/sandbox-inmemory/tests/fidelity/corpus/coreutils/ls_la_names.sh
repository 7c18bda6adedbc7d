mkdir d
touch d/x
ls -la d | awk 'NR > 1 {print $1, $NF}'
