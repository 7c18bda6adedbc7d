#!/usr/bin/env bash
# Build the Docker test image of pai-sandbox-docker locally, without any registry.
#
#   bash scripts/build-test-image.sh          # tags ${PAI_DOCKER_TEST_IMAGE:-pai-test-busybox:latest}
#                                             # and ${PAI_DOCKER_BASH_TEST_IMAGE:-pai-test-bash:latest}
#
# The image is a root filesystem made here from Debian's busybox-static (`apt-get install
# busybox-static`): /bin/busybox and one symlink per applet, /tmp (1777), /root, and /etc/passwd and
# /etc/group naming root and a user 1000 (so `user="1000:1000"` works), imported with
# `docker import`. /workspace is not in it: the provider makes it. Running the script again
# rebuilds the image and retags it. It needs a reachable Docker engine (DOCKER_HOST is honoured).
#
# The second image is the first plus this machine's GNU bash, coreutils, sed, grep, gawk (as awk
# too), jq, findutils and diffutils in /usr/local/bin (first on PATH, so they win over busybox's
# applets; `sh` there is bash), with the shared libraries they load. The in-memory provider's
# fidelity suite runs the scripts of its `skills` group on it, to show they behave on Docker as
# on in-memory. PAI_DOCKER_BASH_TEST_IMAGE= (empty) skips it.
set -euo pipefail

image="${PAI_DOCKER_TEST_IMAGE:-pai-test-busybox:latest}"
bash_image="${PAI_DOCKER_BASH_TEST_IMAGE-pai-test-bash:latest}"
busybox="${BUSYBOX:-/bin/busybox}"

fail() {
  echo "build-test-image: $*" >&2
  exit 1
}

# -- what it needs ---------------------------------------------------------------------------------
command -v docker >/dev/null 2>&1 || fail "the docker command is not installed (Debian: apt-get install docker.io)"
if ! info_error="$(docker info --format '{{.ServerVersion}}' 2>&1 >/dev/null)"; then
  fail "no Docker engine answers at ${DOCKER_HOST:-the default socket}: ${info_error}
  start one (e.g. dockerd --storage-driver=vfs --bridge=none --iptables=false), or set DOCKER_HOST"
fi
[[ -x "$busybox" ]] || fail "$busybox is missing: install Debian's busybox-static (apt-get install busybox-static), or set BUSYBOX=/path/to/a/static/busybox"
# A dynamically linked busybox would not run in an image holding no C library.
linkage="$(ldd "$busybox" 2>&1 || true)"
if [[ "$linkage" != *"not a dynamic executable"* && "$linkage" != *"statically linked"* ]]; then
  fail "$busybox is dynamically linked; the image needs a static one (Debian: busybox-static)"
fi

# -- the root filesystem ---------------------------------------------------------------------------
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
root="$work/root"
mkdir -p "$root/bin" "$root/sbin" "$root/usr/bin" "$root/usr/sbin" "$root/etc" "$root/root" \
  "$root/home/user" "$root/tmp"
chmod 1777 "$root/tmp"
chmod 700 "$root/root"
cp "$busybox" "$root/bin/busybox"
chmod 755 "$root/bin/busybox"

# One symlink per applet, where busybox would install it (bin/sh, usr/bin/env, ...).
applets=0
while IFS= read -r path; do
  [[ -z "$path" || "$path" == "bin/busybox" ]] && continue
  mkdir -p "$root/$(dirname "$path")"
  ln -sf /bin/busybox "$root/$path"
  applets=$((applets + 1))
done < <("$busybox" --list-full)
[[ -e "$root/bin/sh" ]] || fail "$busybox has no sh applet"

cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
user:x:1000:1000:user:/home/user:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
user:x:1000:
nogroup:x:65534:
EOF

# Owners are set in the archive, not on disk, so the script needs no root of its own: everything
# root's, but the user's home, which is 1000's.
tar -C "$root" --numeric-owner --owner=0 --group=0 --exclude=./home/user -cf "$work/rootfs.tar" .
tar -C "$root" --numeric-owner --owner=1000 --group=1000 -rf "$work/rootfs.tar" ./home/user

# -- import ----------------------------------------------------------------------------------------
# import_image TAG MESSAGE TARFILE: import the archive as TAG, then drop the image it replaced when
# nothing uses that any more (a failure there is harmless).
import_image() {
  local previous current
  previous="$(docker image inspect --format '{{.Id}}' "$1" 2>/dev/null || true)"
  docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/sh"]' \
    --message "$2" \
    - "$1" <"$3" >/dev/null
  current="$(docker image inspect --format '{{.Id}}' "$1")"
  if [[ -n "$previous" && "$previous" != "$current" ]]; then
    docker image rm "$previous" >/dev/null 2>&1 || true
  fi
  echo "${current:7:12}"
}
built="$(import_image "$image" \
  "pai test image: busybox $("$busybox" 2>&1 | head -n1 | awk '{print $2}'), built by scripts/build-test-image.sh" \
  "$work/rootfs.tar")"

# -- check -----------------------------------------------------------------------------------------
# The image must run a shell as root and as the user 1000 (no network: none is needed, and a
# daemon started with --bridge=none has no default bridge).
check="$(docker run --rm --network none --user 1000:1000 "$image" sh -c 'id -u; id -g; test -w /tmp && echo ok')"
[[ "$check" == $'1000\n1000\nok' ]] || fail "the built image $image did not run as user 1000 (got: $check)"
echo "build-test-image: built $image ($built, $applets busybox applets)"

# -- the second image: GNU bash and tools over busybox ----------------------------------------------
[[ -n "$bash_image" ]] || exit 0
gnu_tools=(bash sed grep gawk jq find xargs diff cmp)
while IFS= read -r path; do
  case "$path" in */bin/*) gnu_tools+=("${path##*/}") ;; esac
done < <(dpkg -L coreutils 2>/dev/null || true)
((${#gnu_tools[@]} > 20)) || fail "coreutils' programs are not listed by dpkg (Debian: apt-get install coreutils)"
local_bin="$root/usr/local/bin"
mkdir -p "$local_bin"
declare -A libraries=()
for tool in "${gnu_tools[@]}"; do
  program="$(PATH=/usr/bin:/bin type -P "$tool" || true)"
  [[ -n "$program" ]] || fail "$tool is not installed here; the bash test image copies it (Debian: apt-get install bash coreutils sed grep gawk jq findutils diffutils)"
  cp -L "$program" "$local_bin/$tool"
  # The libraries it loads, and the loader itself: the paths ldd prints.
  while IFS= read -r library; do
    libraries["$library"]=1
  done < <(ldd "$program" 2>/dev/null | grep -oE '(/[^ ]+\.so[^ ]*)' || true)
done
for library in "${!libraries[@]}"; do
  mkdir -p "$root$(dirname "$library")"
  cp -L "$library" "$root$library"
done
ln -sf gawk "$local_bin/awk"
ln -sf bash "$local_bin/sh"
tar -C "$root" --numeric-owner --owner=0 --group=0 --exclude=./home/user -cf "$work/rootfs-bash.tar" .
tar -C "$root" --numeric-owner --owner=1000 --group=1000 -rf "$work/rootfs-bash.tar" ./home/user
built="$(import_image "$bash_image" \
  "pai test image: busybox with GNU $(bash --version | head -n1 | awk '{print $1, $2, $3, $4}') and tools, built by scripts/build-test-image.sh" \
  "$work/rootfs-bash.tar")"
check="$(docker run --rm --network none --user 1000:1000 "$bash_image" sh -c 'echo "$BASH_VERSION"; awk --version | head -n1; ls --version | head -n1')"
[[ "$check" == *"GNU Awk"*"GNU coreutils"* && "$check" == [0-9]* ]] || fail "the built image $bash_image does not run GNU bash and tools (got: $check)"
echo "build-test-image: built $bash_image ($built, ${#gnu_tools[@]} GNU programs, ${#libraries[@]} libraries)"
