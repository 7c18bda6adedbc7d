echo null | jq -e .
echo "rc=$?"
