LIB_VERSION=1.2
greet() {
  echo "hello, $1"
}
