set -u
echo "$NOPE"
echo after
