f=a/b/c.txt
echo "$(dirname "$f")/$(basename "$f" .txt).md"
