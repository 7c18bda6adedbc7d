bash "$PWD/s.sh"
