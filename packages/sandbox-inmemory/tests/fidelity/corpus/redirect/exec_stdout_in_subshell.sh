(
  exec > out.txt
  echo captured
)
cat out.txt
