false | true
echo "${PIPESTATUS[@]}"
