head -c 4 /dev/zero | wc -c
