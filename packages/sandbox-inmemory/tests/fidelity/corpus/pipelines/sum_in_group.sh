printf '1\n2\n3\n' | {
  s=0
  while read -r n; do
    s=$((s + n))
  done
  echo "sum $s"
}
