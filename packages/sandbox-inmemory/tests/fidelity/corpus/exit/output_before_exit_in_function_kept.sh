ls
log() { echo "log: $*"; }
main() {
  log start
  if [ ! -f config ]; then
    log "no config"
    exit 1
  fi
  log done
}
main
