trap 'echo caught' ERR
false
echo go
