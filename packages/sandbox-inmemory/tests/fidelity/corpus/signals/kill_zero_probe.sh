sleep 1 &
kill -0 $! && echo alive
kill $!
wait
echo done
