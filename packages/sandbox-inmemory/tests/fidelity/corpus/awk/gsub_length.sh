echo 'foo bar foo' | awk '{n = gsub(/foo/, "baz"); print n, $0, length($0)}'
