#!/bin/bash
a=no
b=
while getopts "ab:" opt; do
  case $opt in
    a) a=yes ;;
    b) b=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
echo "a=$a b=$b rest=$*"
