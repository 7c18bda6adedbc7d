type cd
type -t echo
