trap 'echo x' EXIT
trap - EXIT
echo done
