echo '{}' | jq .missing
