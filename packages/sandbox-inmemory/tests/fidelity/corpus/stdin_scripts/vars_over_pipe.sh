printf 'x=5\necho $((x * 2))\n' | sh
