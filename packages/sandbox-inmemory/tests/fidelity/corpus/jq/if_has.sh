echo '{"a":1}' | jq 'if has("a") then "yes" else "no" end'
