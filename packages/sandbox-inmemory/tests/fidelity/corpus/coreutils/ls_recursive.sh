mkdir -p x/y
touch x/f x/y/g
ls -R x
