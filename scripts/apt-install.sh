#!/usr/bin/env bash
# Install Debian packages for the test tooling: `bash scripts/apt-install.sh WHO PACKAGE...`.
#
# WHO names the caller in messages (with-docker, with-postgres, ci). As root on Debian, runs
# `apt-get update` and `apt-get install --no-install-recommends` quietly; the log is printed only
# on failure. Package scripts may not start services during the install (docker.io and
# postgresql would start their default daemons): a policy-rc.d forbidding it is put in place for
# the install only, and only when the machine has none of its own. Anywhere else it fails, naming
# the packages to install by hand.
set -euo pipefail

who="${1:?usage: bash scripts/apt-install.sh WHO PACKAGE...}"
shift
(($# > 0)) || exit 0

fail() {
  echo "$who: $*" >&2
  exit 1
}

if [[ "$(id -u)" != 0 || ! -r /etc/debian_version ]] || ! command -v apt-get >/dev/null 2>&1; then
  fail "missing $*: install them (Debian: apt-get install $*), or run this as root on Debian"
fi
echo "$who: installing $* (apt-get)" >&2
apt_log="$(mktemp)"
own_policy=""
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod 755 /usr/sbin/policy-rc.d
  own_policy=1
fi
apt_status=0
{
  DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
} >"$apt_log" 2>&1 || apt_status=$?
[[ -n "$own_policy" ]] && rm -f /usr/sbin/policy-rc.d
if ((apt_status != 0)); then
  cat "$apt_log" >&2
  rm -f "$apt_log"
  fail "apt-get could not install $* (exit $apt_status)"
fi
rm -f "$apt_log"
