name=world
cat <<EOF
hello $name
sum $((1 + 1)) sub $(echo inner)
EOF
