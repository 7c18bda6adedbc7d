mkdir e
ls e
echo "[done]"
