{ echo b; echo a; } | sort
