echo '{"v":[1,2,3]}' > d.json
jq '.v | length' d.json
