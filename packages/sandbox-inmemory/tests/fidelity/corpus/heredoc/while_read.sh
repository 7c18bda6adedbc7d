while read -r a b; do
  echo "$b $a"
done <<EOF
1 2
3 4
EOF
