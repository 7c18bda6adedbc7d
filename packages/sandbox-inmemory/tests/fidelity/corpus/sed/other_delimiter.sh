echo /usr/bin | sed 's|/usr|/opt|'
