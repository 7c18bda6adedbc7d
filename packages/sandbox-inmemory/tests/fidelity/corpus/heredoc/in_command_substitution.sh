x=$(cat <<EOF
line one
line two
EOF
)
echo "[$x]"
