bash scripts/bundle.sh
cat bundle.html
