printf 'b\na\nb\n' | sort -u
