bash -s
