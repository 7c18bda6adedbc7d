unset a
echo "${a:-def} ${a-def2}"
b=
echo "[${b:-x}] [${b-x}]"
