#!/usr/bin/env bash
set -euo pipefail
part=${1:-patch}
IFS=. read -r major minor patch < VERSION
case $part in
  major) major=$((major + 1)); minor=0; patch=0 ;;
  minor) minor=$((minor + 1)); patch=0 ;;
  patch) patch=$((patch + 1)) ;;
  *) echo "unknown part: $part" >&2; exit 2 ;;
esac
echo "$major.$minor.$patch" > VERSION
echo "bumped to $(cat VERSION)"
