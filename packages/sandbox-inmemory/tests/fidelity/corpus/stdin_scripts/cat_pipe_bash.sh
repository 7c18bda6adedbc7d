cat s.sh | bash
echo "rc=$?"
