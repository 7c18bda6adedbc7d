. ./lib.sh
greet dot
