set -euo pipefail
name=${1:-default}
echo "name=$name"
items=(a b)
echo "${#items[@]}"
