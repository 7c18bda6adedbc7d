#!/bin/bash
echo "running $0"
for n in 1 2 3; do
  printf '%s ' "$n"
done
echo
