trap 'echo got TERM; exit 0' TERM
kill -TERM $$
echo not reached
