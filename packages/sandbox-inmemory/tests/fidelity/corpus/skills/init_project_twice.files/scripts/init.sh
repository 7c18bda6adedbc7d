#!/bin/bash
set -e
PROJECT_NAME="${1:?usage: init.sh NAME}"
if [ -d "$PROJECT_NAME" ]; then
  echo "error: $PROJECT_NAME already exists" >&2
  exit 1
fi
mkdir -p "$PROJECT_NAME"
echo created
