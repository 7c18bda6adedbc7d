#!/bin/bash
set -e

echo "Bundling..."
if [ ! -f "index.html" ]; then
  echo "Error: no index.html in the current directory" >&2
  exit 1
fi

{
  sed -n '1,/<\/head>/p' index.html | grep -v '</head>'
  echo "<style>"
  cat style.css
  echo "</style>"
  echo "</head>"
  sed -n '/<body>/,$p' index.html
} > bundle.html

SIZE=$(wc -c < bundle.html | tr -d ' ')
echo "Bundle written: bundle.html ($SIZE bytes)"
