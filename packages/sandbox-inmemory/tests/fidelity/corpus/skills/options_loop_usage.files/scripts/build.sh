#!/usr/bin/env bash
set -euo pipefail

usage() {
  echo "usage: $(basename "$0") [-v] [-o OUT] NAME" >&2
  exit 2
}

verbose=0
out=out.txt
while [[ $# -gt 0 ]]; do
  case "$1" in
    -v|--verbose) verbose=1; shift ;;
    -o|--output) out="$2"; shift 2 ;;
    -h|--help) usage ;;
    --) shift; break ;;
    -*) echo "unknown option: $1" >&2; usage ;;
    *) break ;;
  esac
done
[[ $# -eq 1 ]] || usage
echo "building $1"
