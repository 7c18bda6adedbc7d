echo working
if true; then
  exit 3
fi
echo unreachable
