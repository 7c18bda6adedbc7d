touch f
[ "$(date -r f +%Y)" = "$(date +%Y)" ] && echo "written this year"
