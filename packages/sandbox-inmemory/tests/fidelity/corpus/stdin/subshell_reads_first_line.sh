(read -r a; echo "sub $a")
read -r b
echo "main $b"
