mkdir d
echo x > d
echo "rc=$?"
