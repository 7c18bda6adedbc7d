for i in 1 2 3; do
  (echo "job $i" > "job$i.txt") &
done
wait
cat job1.txt job2.txt job3.txt
