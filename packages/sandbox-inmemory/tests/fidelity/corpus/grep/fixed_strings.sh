echo 'a.b' | grep -F '.'
echo 'axb' | grep -cF '.'
echo "rc=$?"
