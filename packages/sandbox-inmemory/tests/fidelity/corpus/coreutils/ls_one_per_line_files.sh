touch one two
ls -1 one two
ls -d .
