bash -c 'Z=3'
echo "Z=[$Z]"
