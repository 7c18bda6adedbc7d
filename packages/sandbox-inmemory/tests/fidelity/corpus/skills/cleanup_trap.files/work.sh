#!/usr/bin/env bash
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "$tmp" > tmpdir.txt
echo partial > "$tmp/part"
cat "$tmp/part"
