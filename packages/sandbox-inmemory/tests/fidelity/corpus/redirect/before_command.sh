> f echo hello world
cat f
