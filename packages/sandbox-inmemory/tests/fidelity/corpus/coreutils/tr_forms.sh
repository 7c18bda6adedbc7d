echo hello | tr a-y b-z
echo 'a  b' | tr -s ' '
echo abc123 | tr -d 0-9
echo hello | tr -cd 'l\n'
