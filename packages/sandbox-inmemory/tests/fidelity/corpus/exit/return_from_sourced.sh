printf 'echo part1\nreturn 4\necho part2\n' > part.sh
. ./part.sh
echo "sourced returned $?"
