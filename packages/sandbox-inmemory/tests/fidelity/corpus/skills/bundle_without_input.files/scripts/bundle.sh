#!/bin/bash
set -e
echo "Bundling..."
if [ ! -f "index.html" ]; then
  echo "Error: no index.html in the current directory" >&2
  exit 1
fi
echo bundled
