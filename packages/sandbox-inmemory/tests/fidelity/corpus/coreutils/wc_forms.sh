printf 'one two\nthree\n' > f
wc -l f
wc -w < f
wc -c < f
