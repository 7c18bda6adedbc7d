touch "a file.txt" "b file.txt"
bash list.sh
