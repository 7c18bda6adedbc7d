pre_a=1
pre_b=2
echo "${!pre_@}"
