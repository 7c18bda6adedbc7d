sh -c "$(cat s.sh)"
