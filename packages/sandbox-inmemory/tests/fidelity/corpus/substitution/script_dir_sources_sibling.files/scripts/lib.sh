say() {
  echo "[lib] $*"
}
