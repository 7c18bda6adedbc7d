source ./lib.sh
greet world
echo "version $LIB_VERSION"
