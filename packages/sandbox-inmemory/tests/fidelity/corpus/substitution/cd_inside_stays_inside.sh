mkdir d
x=$(cd d && pwd)
echo "$x"
pwd
