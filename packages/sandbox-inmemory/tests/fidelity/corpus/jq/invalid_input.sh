if echo 'not json' | jq . > /dev/null 2>&1; then
  echo parsed
else
  echo "refused"
fi
