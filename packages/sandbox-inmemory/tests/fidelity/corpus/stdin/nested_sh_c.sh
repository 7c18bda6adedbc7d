sh -c 'cat > g; wc -c < g'
