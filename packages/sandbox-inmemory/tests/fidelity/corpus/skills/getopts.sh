bash opts.sh -a -b value rest1 rest2
