n=7
if [ "$n" -lt 5 ]; then
  echo small
elif [ "$n" -lt 10 ]; then
  echo medium
else
  echo large
fi
