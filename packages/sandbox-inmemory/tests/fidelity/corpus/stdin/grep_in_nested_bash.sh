bash -c 'grep -c needle'
