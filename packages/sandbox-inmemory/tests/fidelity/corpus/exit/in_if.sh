echo before
if true; then
  echo inside
  exit 3
fi
echo after
