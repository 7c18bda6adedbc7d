if true; then
	cat <<-EOF
		indented
	back
	EOF
fi
