echo '{"a":[1,{"b":null}],"c":"d"}' | jq .
