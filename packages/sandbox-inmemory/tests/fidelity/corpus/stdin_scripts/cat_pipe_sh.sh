cat s.sh | sh
