IFS=, read -ra parts <<< "a,b,c"
echo "${parts[1]} ${#parts[@]}"
