echo '[{"k":"x"},{"k":"y"},{"k":"x"}]' | jq -c 'group_by(.k) | map({k: .[0].k, n: length})'
