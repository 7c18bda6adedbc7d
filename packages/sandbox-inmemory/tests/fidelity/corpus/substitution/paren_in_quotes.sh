echo "$(echo ')')"
echo "$(echo "(")"
