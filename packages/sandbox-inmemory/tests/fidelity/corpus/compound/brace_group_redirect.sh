{
  echo first
  echo second
} > out.txt
cat out.txt
