cd nowhere
echo "rc=$?"
