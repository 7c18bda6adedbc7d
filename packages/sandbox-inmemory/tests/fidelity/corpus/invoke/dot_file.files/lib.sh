greet() {
  if [ -n "$1" ]; then
    echo "hello, $1"
  else
    echo "hello, nobody"
  fi
}
