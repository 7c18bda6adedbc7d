echo '[{"id":1,"ok":true},{"id":2,"ok":false}]' | jq -c '.[] | select(.ok) | .id'
