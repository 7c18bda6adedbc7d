bash scripts/init.sh my-app
find my-app -type f | sort
cat my-app/package.json
