kill -l 15
kill -l 9
