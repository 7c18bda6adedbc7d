#!/usr/bin/env bash
set -euo pipefail
template=$1
shift
content=$(cat "$template")
for pair in "$@"; do
  key=${pair%%=*}
  value=${pair#*=}
  content=${content//"{{$key}}"/$value}
done
printf '%s\n' "$content"
