#!/usr/bin/env bash
# Run a command with a Docker engine answering and the Docker test image built. .ci/run uses it:
#
#   bash scripts/with-docker.sh uv run nox
#
# 1. Packages: as root on Debian, installs what is missing of `docker.io` (only when no engine
#    answers and there is no dockerd), `busybox-static` (for the test image), `gawk` and `jq`
#    (copied into the bash test image with bash and coreutils) and, when this
#    script starts the engine, `runsc` (gVisor, for the Docker provider's `runtime` option),
#    quietly. PAI_WITH_GVISOR=0 leaves gVisor out.
# 2. Engine: when `docker info` does not answer (DOCKER_HOST honoured), starts a private
#    `dockerd --storage-driver=vfs --bridge=none --iptables=false` in the background, with its
#    socket, state and log in a temporary folder (so it never meets a system engine), points
#    DOCKER_HOST at it and waits until it answers (at most PAI_DOCKERD_WAIT seconds, 60 by
#    default); if it does not, prints its log and fails.
# 3. Images: builds ${PAI_DOCKER_TEST_IMAGE:-pai-test-busybox:latest} and
#    ${PAI_DOCKER_BASH_TEST_IMAGE:-pai-test-bash:latest} (scripts/build-test-image.sh).
# 4. Runs the command, then stops the dockerd it started (whatever the command's outcome) and
#    exits with the command's status.
#
# vfs, no bridge and no iptables: the engine then needs no overlay filesystem, no kernel modules
# and no firewall rules, so it starts on a plain machine or inside another container. Containers
# get no network but loopback (the Docker provider's default anyway).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
export PAI_DOCKER_TEST_IMAGE="${PAI_DOCKER_TEST_IMAGE:-pai-test-busybox:latest}"
wait_seconds="${PAI_DOCKERD_WAIT:-60}"

# dockerd lives in /usr/sbin, which a non-login PATH may lack.
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH="$PATH:/usr/sbin:/sbin" ;; esac

say() { echo "with-docker: $*" >&2; }
fail() {
  say "$*"
  exit 1
}

(($# > 0)) || fail "usage: bash scripts/with-docker.sh COMMAND [ARG...]"

engine_answers() { docker info >/dev/null 2>&1; }
installed() { [[ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null)" == ii* ]]; }

# -- 1. packages -----------------------------------------------------------------------------------
# Note: `docker` alone proves nothing: some machines ship the client without an engine.
missing=()
if ! command -v dockerd >/dev/null 2>&1 && ! { command -v docker >/dev/null 2>&1 && engine_answers; }; then
  missing+=(docker.io)
fi
if [[ -z "${BUSYBOX:-}" ]] && ! installed busybox-static; then
  missing+=(busybox-static)
fi
# The bash test image copies this machine's GNU tools; gawk and jq are the ones a Debian
# machine may lack.
if [[ -n "${PAI_DOCKER_BASH_TEST_IMAGE-pai-test-bash:latest}" ]]; then # "" skips that image
  command -v gawk >/dev/null 2>&1 || missing+=(gawk)
  command -v jq >/dev/null 2>&1 || missing+=(jq)
fi
# gVisor only matters to an engine started here (an existing engine keeps its own runtimes).
want_gvisor=""
if [[ "${PAI_WITH_GVISOR:-1}" != 0 ]] && ! engine_answers; then
  want_gvisor=1
  command -v runsc >/dev/null 2>&1 || installed runsc || missing+=(runsc)
fi
if ((${#missing[@]} > 0)); then
  bash "$(dirname "$0")/apt-install.sh" with-docker "${missing[@]}"
fi

# -- 2. engine -------------------------------------------------------------------------------------
dockerd_pid=""
run_dir=""

stop_dockerd() {
  local status=$?
  if [[ -n "$dockerd_pid" ]] && kill -0 "$dockerd_pid" 2>/dev/null; then
    say "stopping the dockerd started here (pid $dockerd_pid)"
    kill -TERM "$dockerd_pid" 2>/dev/null || true
    for _ in $(seq 1 30); do
      kill -0 "$dockerd_pid" 2>/dev/null || break
      sleep 1
    done
    if kill -0 "$dockerd_pid" 2>/dev/null; then
      say "dockerd did not stop in 30 s; killing it"
      kill -KILL "$dockerd_pid" 2>/dev/null || true
    fi
    wait "$dockerd_pid" 2>/dev/null || true
  fi
  # --one-file-system: never descend into a mount a killed engine may have left behind.
  [[ -n "$run_dir" ]] && rm -rf --one-file-system "$run_dir" 2>/dev/null || true
  exit "$status"
}

if engine_answers; then
  say "using the Docker engine at ${DOCKER_HOST:-the default socket} (server $(docker version --format '{{.Server.Version}}' 2>/dev/null))"
else
  [[ -n "${DOCKER_HOST:-}" ]] && say "DOCKER_HOST=$DOCKER_HOST does not answer; starting a private engine instead"
  [[ "$(id -u)" == 0 ]] || fail "no Docker engine answers, and starting dockerd needs root"
  run_dir="$(mktemp -d /tmp/pai-dockerd.XXXXXX)"
  trap stop_dockerd EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  say "starting dockerd (log: $run_dir/dockerd.log)"
  # The engine's own configuration file (never the machine's /etc/docker/daemon.json): gVisor's
  # runsc registered as the runtime "runsc" when it is installed. --network=none: containers have
  # no network anyway, and runsc refuses to start in the root network namespace otherwise;
  # --file-access=shared: files the provider writes through the engine's archive API are seen
  # inside the sandbox.
  runsc_path="$(command -v runsc 2>/dev/null || true)"
  if [[ -n "$want_gvisor" && -n "$runsc_path" ]]; then
    printf '{"runtimes": {"runsc": {"path": "%s", "runtimeArgs": ["--network=none", "--file-access=shared"]}}}\n' \
      "$runsc_path" >"$run_dir/daemon.json"
    say "registering gVisor ($runsc_path) as the runtime runsc"
  else
    echo '{}' >"$run_dir/daemon.json"
  fi
  dockerd --config-file="$run_dir/daemon.json" \
    --storage-driver=vfs --bridge=none --iptables=false \
    --host="unix://$run_dir/docker.sock" --pidfile="$run_dir/dockerd.pid" \
    --data-root="$run_dir/data" --exec-root="$run_dir/exec" \
    >"$run_dir/dockerd.log" 2>&1 </dev/null &
  dockerd_pid=$!
  export DOCKER_HOST="unix://$run_dir/docker.sock"
  waited=0
  until engine_answers; do
    if ! kill -0 "$dockerd_pid" 2>/dev/null; then
      cat "$run_dir/dockerd.log" >&2
      fail "dockerd exited before it answered (its log is above)"
    fi
    if ((waited >= wait_seconds)); then
      cat "$run_dir/dockerd.log" >&2
      fail "dockerd did not answer within ${wait_seconds} s (its log is above)"
    fi
    sleep 1
    waited=$((waited + 1))
  done
  say "dockerd answers at $DOCKER_HOST after ~${waited} s (server $(docker version --format '{{.Server.Version}}'))"
fi

# -- 3. image --------------------------------------------------------------------------------------
bash "$here/build-test-image.sh"

# -- 4. the command --------------------------------------------------------------------------------
# Not exec: the trap above must outlive the command to stop dockerd.
"$@"
