#!/bin/sh
# Prints what it would fill in: the form, then each value.
echo "filling $1"
echo "values: $2"
