s=hello
echo "${#s}"
