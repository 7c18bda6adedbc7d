ls nope 2>&1 >/dev/null | wc -l
ls nope >/dev/null 2>&1 | wc -l
