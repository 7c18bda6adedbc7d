#!/usr/bin/env bash
set -euo pipefail
file=${1:?usage: summary.sh FILE}
[ -f "$file" ] || { echo "no such file: $file" >&2; exit 1; }
rows=$(($(wc -l < "$file") - 1))
echo "rows: $rows"
awk -F, 'NR > 1 {sum[$1] += $3; n[$1]++}
END {for (k in sum) printf "%s %d %.1f\n", k, sum[k], sum[k] / n[k]}' "$file" | sort
