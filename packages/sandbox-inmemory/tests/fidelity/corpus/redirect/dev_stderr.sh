echo oops > /dev/stderr
echo ok
