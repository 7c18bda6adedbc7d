jq -n --arg name bob '{name: $name, n: 1}'
