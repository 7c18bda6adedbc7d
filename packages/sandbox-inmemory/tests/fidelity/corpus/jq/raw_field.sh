echo '{"a":{"b":"x"}}' | jq -r .a.b
