set -- a b c d
shift 2
echo "$# $1"
