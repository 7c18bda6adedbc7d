usage() {
  cat <<EOF
usage: tool [options]
  -h  help
EOF
}
usage
