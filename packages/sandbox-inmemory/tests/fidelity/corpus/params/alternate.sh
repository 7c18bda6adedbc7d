d=1
echo "[${d:+alt}] [${e:+alt}]"
