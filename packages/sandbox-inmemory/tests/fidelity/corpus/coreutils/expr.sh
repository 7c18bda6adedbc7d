expr 3 + 4
expr 10 / 3
expr length hello
