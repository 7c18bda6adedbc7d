echo 'a,b,c' | awk '{n = split($0, p, ","); print n, p[3]}'
