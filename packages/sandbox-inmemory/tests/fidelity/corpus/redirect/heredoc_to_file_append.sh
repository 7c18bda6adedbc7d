cat >> notes.txt <<EOF
first
EOF
cat >> notes.txt <<EOF
second
EOF
cat notes.txt
