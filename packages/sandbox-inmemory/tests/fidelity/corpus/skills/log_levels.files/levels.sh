#!/bin/bash
set -euo pipefail
log=$1
echo "== levels"
grep -oE '\b(INFO|WARN|ERROR)\b' "$log" | sort | uniq -c | sort -rn | awk '{print $2": "$1}'
echo "== first error"
grep -m1 ERROR "$log" | sed -E 's/^[^ ]+ [^ ]+ //'
