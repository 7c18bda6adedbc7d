printf 'the cat the dog the end\n' | tr ' ' '\n' | sort | uniq -c | sort -rn | head -2
