touch f1 f2 g1
files=(f*)
echo "${#files[@]} ${files[*]}"
