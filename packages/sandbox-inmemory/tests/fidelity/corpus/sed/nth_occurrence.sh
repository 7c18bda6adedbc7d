echo aaaa | sed 's/a/b/2'
echo aaaa | sed 's/a/b/2g'
