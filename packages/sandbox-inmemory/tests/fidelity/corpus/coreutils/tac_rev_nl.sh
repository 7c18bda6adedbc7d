printf 'a\nb\n' | tac
echo abc | rev
printf 'x\ny\n' | nl
