. ./show.sh first second
echo "after: $#"
