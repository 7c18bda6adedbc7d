printf 'k=v\n# c\nx=y\n' | sed '/^#/d; s/=/: /'
