printf 'GET 200\nPOST 500\nGET 200\nGET 404\n' | awk '{c[$2]++} END {for (s in c) print s, c[s]}' | sort
