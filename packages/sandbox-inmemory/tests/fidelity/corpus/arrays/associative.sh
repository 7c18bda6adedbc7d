declare -A m=([k1]=v1 [k2]=v2)
m[k3]=v3
for k in $(printf '%s\n' "${!m[@]}" | sort); do
  echo "$k=${m[$k]}"
done
