ls missing 2>&1 | wc -l
