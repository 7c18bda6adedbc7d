sh -s alpha beta < s.sh
