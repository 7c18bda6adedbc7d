for w in apple b.txt 42 other; do
  case "$w" in
    apple|pear) echo "$w: fruit" ;;
    *.txt) echo "$w: text" ;;
    [0-9]*) echo "$w: number" ;;
    *) echo "$w: unknown" ;;
  esac
done
