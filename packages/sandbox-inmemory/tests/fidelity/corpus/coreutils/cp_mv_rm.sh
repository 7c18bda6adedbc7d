echo x > a
cp a b
mv b c
rm a
ls
cat c
