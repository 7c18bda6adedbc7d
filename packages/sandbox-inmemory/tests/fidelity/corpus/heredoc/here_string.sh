read -r x y <<< "a b"
echo "$y$x"
tr a-z A-Z <<< hello
