p=/a/b/c.tar.gz
echo "${p#*/} ${p##*/} ${p%.*} ${p%%.*}"
