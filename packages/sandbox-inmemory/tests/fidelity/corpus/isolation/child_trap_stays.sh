bash -c "trap 'echo child exit' EXIT"
echo parent
