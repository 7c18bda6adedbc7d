#!/usr/bin/env bash
set -euo pipefail
for cmd in awk sed grep; do
  if ! command -v "$cmd" > /dev/null 2>&1; then
    echo "missing $cmd" >&2
    exit 1
  fi
done
echo "tools ok"
if ! command -v no-such-tool-here > /dev/null 2>&1; then
  echo "optional tool absent, continuing"
fi
