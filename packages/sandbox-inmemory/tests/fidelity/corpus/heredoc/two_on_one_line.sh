cat <<A; cat <<B
one
A
two
B
