echo '[["a","b"],["c","d"]]' | jq -r '.[] | @tsv'
