mkdir -p a/b
realpath a/b/..
