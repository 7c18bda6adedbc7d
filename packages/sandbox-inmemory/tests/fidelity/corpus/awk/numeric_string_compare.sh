echo '10 9' | awk '{print ($1 > $2)}'
