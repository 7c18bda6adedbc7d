exec 4< <(printf 'a\nb\n')
read -r x <&4
read -r y <&4
echo "$x$y"
