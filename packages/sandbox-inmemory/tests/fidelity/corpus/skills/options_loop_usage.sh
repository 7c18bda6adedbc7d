bash scripts/build.sh
echo "rc=$?"
bash scripts/build.sh --bogus x
echo "rc=$?"
