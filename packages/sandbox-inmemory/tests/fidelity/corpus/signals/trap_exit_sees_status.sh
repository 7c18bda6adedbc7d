trap 'echo "bye $?"' EXIT
exit 3
