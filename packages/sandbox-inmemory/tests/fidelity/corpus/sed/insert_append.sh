printf 'a\nb\n' | sed '1i first'
printf 'a\nb\n' | sed '$a last'
