bash bump.sh minor
cat VERSION
