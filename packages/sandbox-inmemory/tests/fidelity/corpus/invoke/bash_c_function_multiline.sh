bash -c '
twice() {
  echo "$1$1"
}
twice ab
twice cd
'
