echo '["a","b"]' | jq -r 'join(",")'
