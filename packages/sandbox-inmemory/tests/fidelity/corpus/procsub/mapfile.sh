mapfile -t arr < <(printf 'x\ny\n')
echo "${#arr[@]} ${arr[1]}"
