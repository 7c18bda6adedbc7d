A=1 bash -c 'echo "A=$A"'
echo "[$A]"
