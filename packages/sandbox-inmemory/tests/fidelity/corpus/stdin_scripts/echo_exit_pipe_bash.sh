echo 'exit 4' | bash
echo "got $?"
