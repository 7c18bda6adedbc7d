(W=1)
echo "[$W]"
