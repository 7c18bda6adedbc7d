printf 'foo\nfoobar\nFOO\n' | grep -wi foo
