touch f
chmod 640 f
stat -c '%a %n' f
[ -x f ] || echo "not executable"
