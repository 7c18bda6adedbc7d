shopt -s lastpipe
echo v | read x
echo "[$x]"
