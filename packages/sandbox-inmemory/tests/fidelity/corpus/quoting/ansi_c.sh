printf '%s|' $'a\tb' $'line\\n' $'q\'s'
echo
