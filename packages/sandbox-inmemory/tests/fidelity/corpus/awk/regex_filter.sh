printf 'apple\nbanana\ncherry\n' | awk '/an/ {print NR ": " $0}'
