echo "$(( $(echo 3) * 2 ))"
