printf 'x=1\ny=2\n' > c
sed -i 's/=1/=9/' c
cat c
