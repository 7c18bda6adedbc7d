"""The shell scripts the provider runs inside the container (POSIX ``sh``; busybox is enough).

A command may replace the programs these run through (``/bin/sh`` itself, where the sandbox user
can write it): the instance runs each with a deadline and an output bound, so a replaced one can
make its own operation fail, never hang or flood the host; the timeout kill falls back to killing
the container through the engine (see ``DockerSandboxInstance._stop``).

Each file script reports what went wrong through its exit code (``EXIT_*``), which the instance
maps to the matching ``pai.sandbox`` error. None of them forks a helper on the common path
(``test``, ``read``, ``case`` and parameter expansion are shell builtins), so they cost one exec.
"""

from __future__ import annotations

#: The environment variable marking every process a command starts (one of two ways the timeout
#: kill finds them; the other, the session id, survives ``env -i``).
RUN_MARKER = "PAI_RUN"

KEEPALIVE = ("sleep", "2147483647")  # GNU and busybox sleep both accept this

# Runs the command with bash when the image has it, else sh; $1 command, $2 cwd, $3 stdin file.
# Every `docker exec` process is the leader of a new session, and keeps its pid through `exec`:
# the first line on stdout is that pid, the command's session id, and the leader's start time
# (field 22 of /proc/PID/stat, clock ticks since boot), which the host strips from the output and
# hands to KILL_SCRIPT on a timeout. Everything the command starts inherits the session id,
# whatever it does to its environment, unless it calls setsid itself. (st is a function so that
# its `set --` leaves the script's own arguments alone; no fork.)
RUN_SCRIPT = (
    'st() { set -f; set -- $1; set +f; echo "$$ ${20}"; }\n'
    'if read -r l </proc/$$/stat; then st "${l##*) }"; else echo "$$"; fi\n'
    'cd -- "$2" || exit 1\n'
    'if [ -n "$3" ]; then exec <"$3"; rm -f -- "$3"; else exec </dev/null; fi\n'
    'if command -v bash >/dev/null 2>&1; then exec bash -c "$1"; fi\n'
    'exec sh -c "$1"\n'
)

# Kills everything a command started: $1 its session id (may be empty), $2 its environment marker
# (NAME=value), $3 its start time (may be empty). A target is a process in that session, or
# carrying the marker, or a descendant of a target (by parent chain: catches one that both left
# the session and cleared its environment, while its parent lives), or an orphan (its parent gone,
# adopted by pid 1) that started since the command did, unless it carries the marker of another
# command still running (one whose exec, a process with parent 0, still has it): a process that
# left its session, cleared or forged its environment and lost its parent cannot be traced, and is
# taken for this command's. Markers are hex; anything else read from a process is ignored.
# Targets are stopped first (a stopped process cannot fork), the table is scanned again until no
# new target appears, then all are killed; repeated until none is left.
KILL_SCRIPT = r"""
s=$1; m=$2; t=$3; me=$$
scan() {
  table=
  orphans=
  roots=
  for f in /proc/[0-9]*/stat; do
    read -r line <"$f" 2>/dev/null || continue
    p=${line%% *}
    [ "$p" = "$me" ] && continue
    [ "$p" = 1 ] && continue
    rest=${line##*) }
    set -f; set -- $rest; set +f
    [ "$1" = Z ] && continue
    table="$table$p $2 $4
"
    [ -n "$s" ] && [ "$4" = "$s" ] && case $targets in *" $p "*) ;; *) targets="$targets$p ";; esac
    [ -n "$t" ] && [ "$2" = 1 ] && [ "${20}" -ge "$t" ] 2>/dev/null && orphans="$orphans$p "
    [ "$2" = 0 ] && roots="$roots$p "
  done
  for e in $(grep -lzxF -- "$m" /proc/[0-9]*/environ 2>/dev/null); do
    p=${e#/proc/}; p=${p%/environ}
    [ "$p" = "$me" ] && continue
    case $targets in *" $p "*) ;; *) targets="$targets$p ";; esac
  done
  if [ -n "$orphans" ]; then
    live=
    for r in $roots; do
      v=$(tr '\0' '\n' <"/proc/$r/environ" 2>/dev/null | grep -m1 "^${m%%=*}=")
      case ${v#*=} in ''|*[!0-9a-f]*) continue;; esac
      [ "$v" = "$m" ] || live="$live -e $v"
    done
    spared=" "
    if [ -n "$live" ]; then
      for e in $(grep -lzxF $live /proc/[0-9]*/environ 2>/dev/null); do
        p=${e#/proc/}; spared="$spared${p%/environ} "
      done
    fi
    for p in $orphans; do
      case $spared in *" $p "*) continue;; esac
      case $targets in *" $p "*) ;; *) targets="$targets$p ";; esac
    done
  fi
  grown=1
  while [ $grown = 1 ]; do
    grown=0
    while read -r p pp sd; do
      [ -z "$p" ] && continue
      case $targets in *" $p "*) continue;; esac
      case $targets in *" $pp "*) targets="$targets$p "; grown=1;; esac
    done <<EOF
$table
EOF
  done
}
round=0
while [ $round -lt 20 ]; do
  targets=" "
  scan
  [ "$targets" = " " ] && exit 0
  kill -STOP $targets 2>/dev/null
  before=
  while [ "$before" != "$targets" ]; do
    before=$targets
    scan
    kill -STOP $targets 2>/dev/null
  done
  kill -KILL $targets 2>/dev/null
  round=$((round+1))
done
exit 0
"""

# Exit codes of the file scripts (and codes of WRITE_CHECK_SCRIPT's records).
EXIT_NOT_FOUND, EXIT_NOT_DIR, EXIT_IS_DIR, EXIT_EXISTS, EXIT_NOT_EMPTY, EXIT_LOOP = (
    10,
    11,
    12,
    13,
    14,
    15,
)
#: LIST_SCRIPT: the folder has more entries than its limit.
EXIT_TOO_MANY = 16

# Every parent of $1 must be a folder: 10 when one is missing, 11 when one is not a folder.
_CHECK_PARENTS = r"""
chk() { c=; r=${1#/}; while :; do case $r in */*) ;; *) return 0;; esac
  c="$c/${r%%/*}"; r=${r#*/}
  if [ -d "$c" ]; then :; elif [ -e "$c" ] || [ -L "$c" ]; then exit 11; else exit 10; fi; done; }
"""

# For each path argument, where a write to it lands, as a normal program's open(O_CREAT) would
# see it: symbolic links followed inside the container (`readlink`, forked only for a link), at
# most 40 of them. One NUL-terminated record per path: code, resolved path, deepest existing
# folder on the way (the host makes the folders below it). Codes: 0 fine, 11 a parent is not a
# folder, 12 the path is a folder, 10 a missing folder followed by '..', 15 too many links.
_RESOLVE = r"""
resolve() {
  cur=; rest=${1#/}; n=0; C=0; E=/; missing=0
  while [ -n "$rest" ]; do
    case $rest in */*) part=${rest%%/*}; rest=${rest#*/};; *) part=$rest; rest=;; esac
    case $part in '' | .) continue;; esac
    if [ "$part" = .. ]; then
      [ $missing = 1 ] && { C=10; return; }
      cur=${cur%/*}; continue
    fi
    next=$cur/$part
    if [ $missing = 1 ]; then cur=$next; continue; fi
    if [ -L "$next" ]; then
      n=$((n+1)); [ $n -gt 40 ] && { C=15; return; }
      t=$(readlink -- "$next"); [ -z "$t" ] && { C=10; return; }
      case $t in /*) cur=;; esac
      if [ -n "$rest" ]; then rest=$t/$rest; else rest=$t; fi
      continue
    fi
    if [ -d "$next" ]; then cur=$next; E=$next
    elif [ -e "$next" ]; then [ -n "$rest" ] && { C=11; return; }; cur=$next
    else cur=$next; missing=1
    fi
  done
  [ $missing = 0 ] && [ -d "${cur:-/}" ] && C=12
}
"""

WRITE_CHECK_SCRIPT = (
    _RESOLVE
    + r"""
for p in "$@"; do
  resolve "$p"
  printf '%s\0%s\0%s\0' "$C" "${cur:-/}" "$E"
done
"""
)

# Writes small files in the same exec that checks them: arguments are triples of path, mode
# (octal) and content (printf %b escapes, so any byte passes through an argument). Every path is
# checked first (as WRITE_CHECK_SCRIPT does); the first that fails is printed as "index code" and
# nothing is written (exit 3). Then each is written through its resolved path, as the sandbox
# user, making missing folders: `>` keeps an existing file's inode, links and hard links alike.
WRITE_SMALL_SCRIPT = (
    _RESOLVE
    + r"""
check() {
  i=0
  while [ $# -gt 0 ]; do
    resolve "$1"
    [ "$C" = 0 ] || { echo "$i $C"; exit 3; }
    i=$((i+1)); shift 3
  done
}
write() {
  while [ $# -gt 0 ]; do
    resolve "$1"; r=${cur:-/}
    [ -d "${r%/*}/" ] || mkdir -p -- "${r%/*}" || exit 1
    printf '%b' "$3" >"$r" || exit 1
    [ "$2" = 644 ] || chmod "$2" -- "$r" || exit 1
    shift 3
  done
}
umask 022
check "$@"
write "$@"
"""
)

# $1 the folder, $2 the most entries to list (one more is exit 16, before any is printed).
LIST_SCRIPT = (
    _CHECK_PARENTS
    + r"""
p=$1; chk "$p"
[ -e "$p" ] || [ -L "$p" ] || exit 10
[ -d "$p" ] || exit 11
b=${p%/}; n=$2
set --
for f in "$b"/* "$b"/.[!.]* "$b"/..?*; do
  { [ -e "$f" ] || [ -L "$f" ]; } || continue
  [ $# -ge "$n" ] && exit 16
  set -- "$@" "$f"
done
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

IDS_SCRIPT = "id -u; id -g"
