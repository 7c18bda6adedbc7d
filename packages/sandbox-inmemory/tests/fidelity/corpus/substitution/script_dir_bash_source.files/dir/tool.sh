#!/usr/bin/env bash
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
echo "dir: $SCRIPT_DIR"
echo "name: $(basename "${BASH_SOURCE[0]}")"
