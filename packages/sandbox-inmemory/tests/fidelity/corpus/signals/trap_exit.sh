trap 'echo cleanup' EXIT
echo work
