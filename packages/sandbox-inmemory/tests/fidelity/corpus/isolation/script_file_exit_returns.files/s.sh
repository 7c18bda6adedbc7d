set -e
echo in child
false
echo never
