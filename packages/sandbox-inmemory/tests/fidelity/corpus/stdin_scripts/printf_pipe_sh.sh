printf 'echo one\necho two\n' | sh
