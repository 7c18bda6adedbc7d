echo '{"b":1,"a":[1,2]}' | jq -S -c .
