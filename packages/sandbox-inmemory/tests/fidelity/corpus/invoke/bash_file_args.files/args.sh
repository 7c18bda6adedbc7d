echo "$#: $*"
for a in "$@"; do
  echo "[$a]"
done
