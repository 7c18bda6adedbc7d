#!/usr/bin/env bash
# Run a command with a PostgreSQL server answering at PAI_TEST_POSTGRES_URL. .ci/run uses it:
#
#   bash scripts/with-postgres.sh uv run nox
#
# 1. A server of your own: when PAI_TEST_POSTGRES_URL is set and a server answers there, the
#    command runs against it and nothing is started (the tests make and drop a schema per test,
#    so point it at a database you can spare).
# 2. Packages: otherwise, as root on Debian, installs `postgresql` when no initdb is found
#    (quietly; the log is shown on failure).
# 3. Server: initdb in a temporary folder as an unprivileged user (initdb refuses root: as root,
#    the system user `postgres` when it exists, else a system user `pai-postgres` made for it,
#    through runuser), then `pg_ctl start` listening on 127.0.0.1 only, on a free port, with its
#    unix socket in that folder and fsync off (a test server: a crash of the machine may lose
#    it). Waits until it answers (at most PAI_POSTGRES_WAIT seconds, 60 by default); if it does
#    not, prints its log and fails.
# 4. Creates the role `pai_test` with a random password and the database `pai_test` it owns,
#    exports PAI_TEST_POSTGRES_URL=postgresql://pai_test:PASSWORD@127.0.0.1:PORT/pai_test (the
#    password is in it, so the tests exercise password handling; it is never printed here) and
#    PAI_TEST_POSTGRES_PGCTL (the `pg_ctl -D DATA -l LOG` command line, run as the server's
#    user: the fault tests restart the server with it).
# 5. Runs the command, then stops the server (`pg_ctl stop -m fast`) and removes the folder,
#    whatever the command's outcome, and exits with the command's status.
set -euo pipefail

wait_seconds="${PAI_POSTGRES_WAIT:-60}"

say() { echo "with-postgres: $*" >&2; }
fail() {
  say "$*"
  exit 1
}

(($# > 0)) || fail "usage: bash scripts/with-postgres.sh COMMAND [ARG...]"

# -- 1. a server already there -------------------------------------------------------------------
answers() {
  # psql reads the password from the URL; PGCONNECT_TIMEOUT bounds a server that never answers.
  PGCONNECT_TIMEOUT=5 psql "$1" -XAtqc 'SELECT 1' >/dev/null 2>&1
}

masked() { sed -E 's#(://[^:/@]*):[^@/]*@#\1:***@#' <<<"$1"; }

if [[ -n "${PAI_TEST_POSTGRES_URL:-}" ]]; then
  if command -v psql >/dev/null 2>&1 && answers "$PAI_TEST_POSTGRES_URL"; then
    say "using the server at $(masked "$PAI_TEST_POSTGRES_URL") (PAI_TEST_POSTGRES_URL)"
    exec "$@"
  fi
  say "PAI_TEST_POSTGRES_URL=$(masked "$PAI_TEST_POSTGRES_URL") does not answer; starting a private server instead"
fi

# -- 2. packages ---------------------------------------------------------------------------------
find_bin() {
  local found
  found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  if [[ -n "$found" && -x "$found/initdb" && -x "$found/pg_ctl" ]]; then
    echo "$found"
  elif command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
  fi
}

bin="$(find_bin)"
if [[ -z "$bin" ]]; then
  bash "$(dirname "$0")/apt-install.sh" with-postgres postgresql
  bin="$(find_bin)"
  [[ -n "$bin" ]] || fail "postgresql is installed but no initdb and pg_ctl were found under /usr/lib/postgresql/*/bin"
fi

# -- 3. server -----------------------------------------------------------------------------------
# Who runs the server: initdb and postgres refuse to run as root.
as_server=()
server_user="$(id -un)"
if [[ "$(id -u)" == 0 ]]; then
  if getent passwd postgres >/dev/null; then
    server_user=postgres
  else
    server_user=pai-postgres
    if ! getent passwd "$server_user" >/dev/null; then
      useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$server_user" ||
        fail "could not create the system user $server_user to run the server as"
    fi
  fi
  as_server=(runuser -u "$server_user" --)
fi

run_dir="$(mktemp -d /tmp/pai-postgres.XXXXXX)"
data="$run_dir/data"
log="$run_dir/server.log"
started=""

stop_server() {
  local status=$?
  if [[ -n "$started" ]]; then
    say "stopping the server started here"
    "${as_server[@]}" "$bin/pg_ctl" -D "$data" -m fast -w -t 30 stop >/dev/null 2>&1 ||
      "${as_server[@]}" "$bin/pg_ctl" -D "$data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
  fi
  rm -rf --one-file-system "$run_dir" 2>/dev/null || true
  exit "$status"
}
trap stop_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

chmod 700 "$run_dir"
[[ "$(id -u)" == 0 ]] && chown "$server_user" "$run_dir"

# A free port: ask the kernel for one, then let the server take it (a race with another program
# taking it in between is reported by pg_ctl and the log).
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
password="$(python3 -c 'import secrets; print(secrets.token_hex(16))')"

init_log="$run_dir/initdb.log"
if ! "${as_server[@]}" "$bin/initdb" -D "$data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
  --encoding=UTF8 --locale=C --no-sync >"$init_log" 2>&1; then
  cat "$init_log" >&2
  fail "initdb failed (its output is above)"
fi

say "starting PostgreSQL ($("$bin/postgres" --version | awk '{print $3}')) on 127.0.0.1:$port (data: $data)"
if ! "${as_server[@]}" "$bin/pg_ctl" -D "$data" -l "$log" -w -t "$wait_seconds" \
  -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$run_dir -c fsync=off -c full_page_writes=off -c max_connections=200" \
  start >/dev/null 2>&1; then
  cat "$log" >&2 2>/dev/null || true
  fail "the server did not start within ${wait_seconds} s (its log is above)"
fi
started=1

# -- 4. the test role and database ---------------------------------------------------------------
admin=("${as_server[@]}" psql -X -q -v ON_ERROR_STOP=1 -h "$run_dir" -p "$port" -U postgres -d postgres)
# The password goes in through psql's variables, never on a command line `ps` could show.
if ! "${admin[@]}" -v pw="$password" >/dev/null <<'SQL'; then
CREATE ROLE pai_test LOGIN PASSWORD :'pw';
CREATE DATABASE pai_test OWNER pai_test;
SQL
  cat "$log" >&2
  fail "could not create the test role and database (the server log is above)"
fi

export PAI_TEST_POSTGRES_URL="postgresql://pai_test:$password@127.0.0.1:$port/pai_test"
export PAI_TEST_POSTGRES_PGCTL="${as_server[*]} $bin/pg_ctl -D $data -l $log"
answers "$PAI_TEST_POSTGRES_URL" || {
  cat "$log" >&2
  fail "the server started but does not answer at $(masked "$PAI_TEST_POSTGRES_URL")"
}
say "PAI_TEST_POSTGRES_URL=$(masked "$PAI_TEST_POSTGRES_URL")"

# -- 5. the command ------------------------------------------------------------------------------
# Not exec: the trap above must outlive the command to stop the server.
"$@"
