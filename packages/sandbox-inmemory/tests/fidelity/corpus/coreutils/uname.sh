uname -s
uname | wc -l
