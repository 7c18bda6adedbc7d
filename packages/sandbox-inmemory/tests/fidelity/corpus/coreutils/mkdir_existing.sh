mkdir d
mkdir d
echo "rc=$?"
mkdir -p d && echo ok
