echo hi | tee out.txt
cat out.txt
