echo x | exit 3
echo "after $?"
