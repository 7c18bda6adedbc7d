printf 'a 1\nb 5\nc 3\n' | awk '$2 > 2 {print $1}'
