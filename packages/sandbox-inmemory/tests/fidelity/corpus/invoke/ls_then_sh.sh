ls; sh s.sh; echo exit=$?
