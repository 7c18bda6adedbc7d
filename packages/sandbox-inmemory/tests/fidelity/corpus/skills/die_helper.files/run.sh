#!/usr/bin/env bash
set -euo pipefail
die() {
  echo "error: $*" >&2
  exit 3
}
[ -f config.yml ] || die "config.yml missing"
echo unreachable
