(echo sub; exit 4)
echo "after $?"
