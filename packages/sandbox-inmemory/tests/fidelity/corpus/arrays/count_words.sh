declare -A c
for w in a b a c a; do
  c[$w]=$(( ${c[$w]:-0} + 1 ))
done
echo "${c[a]} ${c[b]} ${c[c]}"
