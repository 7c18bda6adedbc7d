echo '{"a":1}' | jq -c '.a += 1 | .b = "new"'
