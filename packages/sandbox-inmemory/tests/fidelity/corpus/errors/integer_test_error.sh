[ abc -eq 1 ]
echo "rc=$?"
