cleanup() {
  echo "cleaning $1"
}
trap 'cleanup now' EXIT
echo main
exit 0
