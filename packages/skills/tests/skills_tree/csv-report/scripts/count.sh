#!/bin/sh
# Counts the data rows of a CSV file (every line but the header).
lines=$(wc -l < "$1")
echo "rows: $((lines - 1))"
