printf '1\n2\n3\n' | jq -s 'add'
