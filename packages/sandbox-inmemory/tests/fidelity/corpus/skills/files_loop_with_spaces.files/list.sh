#!/usr/bin/env bash
set -euo pipefail
shopt -s nullglob
n=0
for f in ./*.txt; do
  n=$((n + 1))
  echo "$n: ${f#./}"
done
echo "total $n"
