printf hello | base64
echo aGVsbG8= | base64 -d
echo
