echo '{"a":1,"b":2}' | jq -r 'to_entries[] | "\(.key) \(.value)"'
