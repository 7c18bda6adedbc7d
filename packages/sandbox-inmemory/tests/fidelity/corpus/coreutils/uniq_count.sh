printf 'a\na\nb\na\n' | uniq -c
