touch new.txt
[ -f new.txt ] && [ ! -s new.txt ] && echo "empty file"
echo x > new.txt
[ -s new.txt ] && echo "has content"
