export Y=2
bash -c 'echo "Y=[$Y]"'
