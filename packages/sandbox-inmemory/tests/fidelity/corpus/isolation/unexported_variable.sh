X=1
bash -c 'echo "X=[$X]"'
