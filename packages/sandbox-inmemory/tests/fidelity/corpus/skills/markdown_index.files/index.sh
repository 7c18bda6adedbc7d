#!/usr/bin/env bash
set -euo pipefail
dir=${1:-.}
echo "# Index of $dir"
find "$dir" -name '*.md' -type f | sort | while read -r f; do
  title=$(head -n1 "$f" | sed 's/^# *//')
  echo "- [$title]($f)"
done
