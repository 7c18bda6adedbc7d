jq -r '.name' <<'EOF'
{"name": "demo", "tags": ["a", "b"]}
EOF
