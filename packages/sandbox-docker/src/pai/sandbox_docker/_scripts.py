"""The shell scripts the provider runs inside the container (POSIX ``sh``; busybox is enough).

Each file script reports what went wrong through its exit code (``EXIT_*``), which the instance
maps to the matching ``pai.sandbox`` error.
"""

from __future__ import annotations

#: The environment variable marking every process a command starts (for the timeout kill).
RUN_MARKER = "PAI_RUN"

KEEPALIVE = ("sleep", "2147483647")  # GNU and busybox sleep both accept this


# Runs the command with bash when the image has it, else sh; $1 command, $2 cwd, $3 stdin file.
RUN_SCRIPT = (
    'cd -- "$2" || exit 1\n'
    'if [ -n "$3" ]; then exec <"$3"; rm -f -- "$3"; else exec </dev/null; fi\n'
    'if command -v bash >/dev/null 2>&1; then exec bash -c "$1"; fi\n'
    'exec sh -c "$1"\n'
)

# Kills every process whose environment carries the run's marker (so also what the command put in
# the background or in another session), repeating until none is left.
KILL_SCRIPT = r"""
m="$1"; i=0
while [ $i -lt 50 ]; do
  found=0
  for e in /proc/[0-9]*/environ; do
    p=${e#/proc/}; p=${p%/environ}
    [ "$p" = "$$" ] && continue
    if grep -qzxF "$m" "$e" 2>/dev/null; then kill -KILL "$p" 2>/dev/null; found=1; fi
  done
  [ $found = 0 ] && exit 0
  i=$((i+1))
done
exit 0
"""

# Exit codes of the file scripts.
EXIT_NOT_FOUND, EXIT_NOT_DIR, EXIT_IS_DIR, EXIT_EXISTS, EXIT_NOT_EMPTY = 10, 11, 12, 13, 14

# Every parent of $1 must be a folder: 10 when one is missing, 11 when one is not a folder.
_CHECK_PARENTS = r"""
chk() { c=; r=${1#/}; while :; do case $r in */*) ;; *) return 0;; esac
  c="$c/${r%%/*}"; r=${r#*/}
  if [ -d "$c" ]; then :; elif [ -e "$c" ] || [ -L "$c" ]; then exit 11; else exit 10; fi; done; }
"""

LIST_SCRIPT = (
    _CHECK_PARENTS
    + r"""
p=$1; chk "$p"
[ -e "$p" ] || [ -L "$p" ] || exit 10
[ -d "$p" ] || exit 11
b=${p%/}
set --
for f in "$b"/* "$b"/.[!.]* "$b"/..?*; do { [ -e "$f" ] || [ -L "$f" ]; } && set -- "$@" "$f"; done
[ $# -eq 0 ] && exit 0
exec stat -c '%F|%s|%n' -- "$@"
"""
)

REMOVE_SCRIPT = (
    _CHECK_PARENTS
    + r"""
p=$1; chk "$p"
[ -e "$p" ] || [ -L "$p" ] || exit 10
if [ -d "$p" ] && [ ! -L "$p" ]; then
  [ "$2" = 1 ] && exec rm -rf -- "$p"
  for f in "$p"/* "$p"/.[!.]* "$p"/..?*; do { [ -e "$f" ] || [ -L "$f" ]; } && exit 14; done
  exec rmdir -- "$p"
fi
exec rm -f -- "$p"
"""
)

MAKE_DIR_SCRIPT = (
    _CHECK_PARENTS
    + r"""
p=$1
if [ "$2" = 1 ]; then
  c=; r=${p#/}
  while [ -n "$r" ]; do
    part=${r%%/*}; case $r in */*) r=${r#*/};; *) r=;; esac
    c="$c/$part"
    [ -d "$c" ] && continue
    if [ -e "$c" ] || [ -L "$c" ]; then [ -n "$r" ] && exit 11; exit 13; fi
    mkdir -- "$c" 2>/dev/null || [ -d "$c" ] || mkdir -- "$c" || exit 1
  done
  exit 0
fi
chk "$p"
{ [ -e "$p" ] || [ -L "$p" ]; } && exit 13
exec mkdir -- "$p"
"""
)

EXISTS_SCRIPT = '[ -e "$1" ] || [ -L "$1" ]'

IDS_SCRIPT = "id -u; id -g"
