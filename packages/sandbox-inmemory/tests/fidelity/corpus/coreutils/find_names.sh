mkdir -p a/b
touch a/1.txt a/b/2.txt a/b/3.log
find . -name '*.txt' | sort
find a -type d | sort
