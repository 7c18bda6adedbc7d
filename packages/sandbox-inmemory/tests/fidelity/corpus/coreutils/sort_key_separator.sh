printf 'b,2\na,10\nc,1\n' | sort -t, -k2,2n
