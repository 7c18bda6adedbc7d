echo '[{"n":1},{"n":5},{"n":3}]' | jq -c 'map(select(.n > 2)) | map(.n)'
