: "${REQ:?REQ must be set}"
echo never
