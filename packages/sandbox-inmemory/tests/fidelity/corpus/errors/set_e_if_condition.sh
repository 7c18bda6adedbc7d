set -e
if false; then :; fi
false || true
echo survived
