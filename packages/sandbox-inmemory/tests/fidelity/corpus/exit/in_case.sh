x=stop
case $x in
  stop)
    echo stopping
    exit 6
    ;;
esac
echo never
