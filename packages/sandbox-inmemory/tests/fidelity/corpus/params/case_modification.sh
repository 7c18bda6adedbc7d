s="hello World"
echo "${s^^} ${s,,} ${s^}"
