printf 'x\ny\nx\n' | grep -n x
