set -e
(false; echo no)
echo after
