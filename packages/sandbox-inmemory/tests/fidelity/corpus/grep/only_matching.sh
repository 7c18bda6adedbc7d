echo 'a1b22c333' | grep -o '[0-9]\+'
