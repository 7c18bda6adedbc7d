echo a | tee f > /dev/null
echo b | tee -a f
cat f
