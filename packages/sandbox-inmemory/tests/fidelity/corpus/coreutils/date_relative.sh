date -d '2024-01-31 + 1 day' +%F
