case "$0" in
  */*) echo "called with a path: $0" ;;
  *) echo "called by name: $0" ;;
esac
