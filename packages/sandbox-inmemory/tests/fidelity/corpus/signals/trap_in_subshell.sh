(
  trap 'echo sub-exit' EXIT
  echo in
)
echo out
