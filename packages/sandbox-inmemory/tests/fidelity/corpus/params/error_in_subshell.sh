( : "${MISSING:?need MISSING}" )
echo "rc=$?"
