printf 'a\nb\n' | jq -R .
