jq -n --argjson v '{"a":1}' '$v.a + 1'
