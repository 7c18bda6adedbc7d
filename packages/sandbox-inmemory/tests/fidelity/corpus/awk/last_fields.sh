echo 'a b c' | awk '{print $NF, $(NF - 1)}'
