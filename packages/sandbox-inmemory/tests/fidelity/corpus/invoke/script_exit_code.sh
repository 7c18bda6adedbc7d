bash s.sh
echo "code $?"
