bash -c 'set -e'
false
echo "parent still runs"
