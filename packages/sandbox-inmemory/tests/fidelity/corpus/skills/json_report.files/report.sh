#!/usr/bin/env bash
set -euo pipefail
name=$1
count=$2
jq -n --arg name "$name" --argjson count "$count" \
  '{name: $name, count: $count, double: ($count * 2), ok: true}'
