#!/usr/bin/env bash
set -euo pipefail
mkdir -p backups
echo data > state.txt
for i in 1 2 3; do
  cp state.txt "backups/state.$i.txt"
done
count=$(ls backups | wc -l)
echo "kept $count backups"
