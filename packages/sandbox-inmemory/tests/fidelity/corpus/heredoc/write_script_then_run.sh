cat > s.sh <<'EOF'
if [ ! -f p ]; then
  echo "no pkg"
fi
echo end
EOF
bash s.sh
