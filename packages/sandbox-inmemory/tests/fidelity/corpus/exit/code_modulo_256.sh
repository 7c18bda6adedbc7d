(exit 300)
echo "$?"
