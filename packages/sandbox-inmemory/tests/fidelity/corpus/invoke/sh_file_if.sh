sh s.sh
