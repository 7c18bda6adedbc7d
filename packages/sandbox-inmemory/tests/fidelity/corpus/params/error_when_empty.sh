v=
echo "${v:?is empty}"
echo never
