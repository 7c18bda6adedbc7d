printf '1\n2\n3\n' | sed -n '1!G;h;$p'
