echo 'hello world' | sed 's/\w\+/\U&/'
echo 'hello world' | sed -E 's/(h)(e)/\U\1\E\2/'
