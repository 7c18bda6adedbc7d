for i in 1 2 3; do
  for j in a b c; do
    if [ "$j" = b ]; then continue; fi
    if [ "$i" = 3 ]; then break 2; fi
    echo "$i$j"
  done
done
