sleep 1 &
pid=$!
kill "$pid"
wait "$pid"
echo "status $?"
