printf 'l1\nl2\nl3\n' > f
mapfile -t lines < f
echo "${lines[2]} ${#lines[@]}"
