nosuchcmd
echo "rc=$?"
