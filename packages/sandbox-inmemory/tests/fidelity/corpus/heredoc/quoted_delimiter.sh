cat <<'EOF'
$HOME $(echo x) `echo y`
EOF
