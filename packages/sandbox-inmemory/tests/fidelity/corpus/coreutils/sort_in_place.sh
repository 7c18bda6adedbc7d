printf 'b\na\n' > f
sort -o f f
cat f
