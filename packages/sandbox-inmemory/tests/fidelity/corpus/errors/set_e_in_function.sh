set -e
f() {
  false
  echo in-f
}
f
echo after
