bash work.sh
if [ -d "$(cat tmpdir.txt)" ]; then echo leaked; else echo cleaned; fi
