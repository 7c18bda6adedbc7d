bash scripts/build.sh -v -o res.txt demo
cat res.txt
