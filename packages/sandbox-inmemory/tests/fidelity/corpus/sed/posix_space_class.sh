printf '  a b \n' | sed 's/^[[:space:]]*//; s/[[:space:]]*$//'
