basename /a/b/c.txt .txt
dirname /a/b/c.txt
dirname file
basename -s .sh x.sh
