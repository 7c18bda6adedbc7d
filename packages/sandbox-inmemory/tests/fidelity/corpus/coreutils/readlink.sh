touch t
ln -s t l
readlink l
readlink -f l
