bash scripts/bundle.sh
echo "rc=$?"
