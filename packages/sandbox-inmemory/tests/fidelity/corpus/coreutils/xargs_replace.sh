printf 'a\nb\n' | xargs -I{} echo "item {}"
