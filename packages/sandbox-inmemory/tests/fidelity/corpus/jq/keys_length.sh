echo '{"b":1,"a":2}' | jq -c 'keys, length'
