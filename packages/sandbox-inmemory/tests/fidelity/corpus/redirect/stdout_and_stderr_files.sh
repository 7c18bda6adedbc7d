{ echo out; echo err >&2; } > o.txt 2> e.txt
cat o.txt e.txt
