sh < s.sh
