for n in 1 2 3 4; do
  if [ $((n % 2)) -eq 0 ]; then
    if [ "$n" -gt 2 ]; then
      echo "$n big even"
    else
      echo "$n small even"
    fi
  fi
done
