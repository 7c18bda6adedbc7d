cat <<EOF | sort
pear
apple
EOF
