cat <(echo one) <(echo two)
