bash -c 'exec echo replaced; echo never'
echo parent
