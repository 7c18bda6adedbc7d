fact() {
  if [ "$1" -le 1 ]; then
    echo 1
  else
    local p
    p=$(fact $(($1 - 1)))
    echo $(($1 * p))
  fi
}
fact 6
