#!/bin/bash
set -e

if [ -z "$1" ]; then
  echo "Usage: ./init.sh <project-name>"
  exit 1
fi

PROJECT_NAME="$1"
SCRIPT_DIR="$(cd "$(dirname "$0")" && pwd)"

if [ -d "$PROJECT_NAME" ]; then
  echo "error: $PROJECT_NAME already exists" >&2
  exit 1
fi

echo "Creating $PROJECT_NAME"
mkdir -p "$PROJECT_NAME/src"

cat > "$PROJECT_NAME/package.json" <<EOF
{
  "name": "$PROJECT_NAME",
  "version": "0.1.0"
}
EOF

cat > "$PROJECT_NAME/src/index.html" << 'EOF'
<!doctype html>
<div id="root"></div>
EOF

echo "Project ready (template from $(basename "$SCRIPT_DIR"))"
