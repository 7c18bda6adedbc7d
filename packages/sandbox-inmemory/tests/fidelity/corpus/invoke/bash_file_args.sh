bash args.sh a "b c" d
