greet() {
  local name=$1
  echo "hi $name"
}
greet a
greet b
