sum() {
  local n=$1
  if ((n == 0)); then
    echo 0
    return
  fi
  local r
  r=$(sum $((n - 1)))
  echo $((n + r))
}
sum 20
