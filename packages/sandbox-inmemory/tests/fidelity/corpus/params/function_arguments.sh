f() {
  echo "$# $* $1"
}
f x y
