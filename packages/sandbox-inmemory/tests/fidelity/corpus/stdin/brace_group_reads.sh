{ read -r a; read -r b; } 
echo "$a+$b"
