#!/usr/bin/env bash
set -uo pipefail
die() { echo "error: $*" >&2; exit 1; }
file=$1
[ -f "$file" ] || die "$file not found"
[ "$(head -n1 "$file")" = "---" ] || die "$file: no frontmatter"
name=$(sed -n '2,/^---$/{s/^name: *//p}' "$file")
[ -n "$name" ] || die "$file: no name"
echo "skill: $name"
