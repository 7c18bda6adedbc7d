export FOO=bar
printenv FOO
env | grep -c '^FOO=bar$'
