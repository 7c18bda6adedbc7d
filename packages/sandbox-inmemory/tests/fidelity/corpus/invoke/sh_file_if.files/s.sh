if [ ! -f p ]; then
  echo "no pkg"
fi
echo end
