s=aaa-bbb-aaa
echo "${s/aaa/x} ${s//aaa/x} ${s/#aaa/x} ${s/%aaa/x}"
