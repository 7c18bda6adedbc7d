[ -z "" ] && echo empty
[ -n x ] && echo nonempty
[[ abc == a* ]] && echo glob
[[ abc =~ ^a(b)c$ ]] && echo "re ${BASH_REMATCH[1]}"
[ -d . ] && [ ! -e nope ] && echo paths
