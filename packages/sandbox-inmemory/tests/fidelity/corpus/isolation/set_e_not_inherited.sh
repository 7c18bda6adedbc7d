set -e
bash -c 'false; echo child continues'
echo parent continues
