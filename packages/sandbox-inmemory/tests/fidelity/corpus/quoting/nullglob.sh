shopt -s nullglob
for f in *.none; do
  echo "$f"
done
echo end
