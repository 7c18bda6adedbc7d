(exit 3) &
wait $!
echo "rc=$?"
