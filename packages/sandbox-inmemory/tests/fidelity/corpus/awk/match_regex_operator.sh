printf 'a1\nb\nc22\n' | awk '$0 ~ /[0-9]+$/ {print $0} $0 !~ /[0-9]/ {print "no digits:", $0}'
