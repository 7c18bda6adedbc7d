f() {
  echo "in f"
  exit 5
}
echo start
f
echo never
