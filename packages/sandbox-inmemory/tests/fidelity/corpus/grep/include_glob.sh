mkdir p
echo 'import os' > p/a.py
echo 'import x' > p/b.txt
grep -r --include='*.py' import .
