a=(1 2 3)
(IFS=,; echo "${a[*]}")
