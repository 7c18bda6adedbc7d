printf '[%s]' "" a ""
echo
