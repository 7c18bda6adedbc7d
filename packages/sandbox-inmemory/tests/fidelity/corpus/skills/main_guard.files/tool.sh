#!/usr/bin/env bash
helper() {
  echo "helper: $1"
}
main() {
  helper "main $1"
}
if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then
  main "$@"
fi
