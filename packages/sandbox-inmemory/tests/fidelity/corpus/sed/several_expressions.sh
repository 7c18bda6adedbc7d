echo abc | sed -e s/a/A/ -e s/c/C/
