echo "$(echo "$(echo "deep $(echo "er")")")"
