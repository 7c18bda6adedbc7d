set -u
echo "${NOPE:-fine}"
