bash scripts/main.sh
