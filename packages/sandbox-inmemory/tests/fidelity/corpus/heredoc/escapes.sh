b=B
cat <<EOF
a\$b \\ \`x\` $b
EOF
