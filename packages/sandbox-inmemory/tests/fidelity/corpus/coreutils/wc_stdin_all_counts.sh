printf 'a b\nc\n' | wc
