echo "[$UNSET_VAR]"
