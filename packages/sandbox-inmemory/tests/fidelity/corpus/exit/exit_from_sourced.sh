printf 'echo in file\nexit 9\n' > quit.sh
. ./quit.sh
echo never
