function add {
  echo $(( $1 + $2 ))
}
add 2 3
