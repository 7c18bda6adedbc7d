echo "$0"
basename "$0"
