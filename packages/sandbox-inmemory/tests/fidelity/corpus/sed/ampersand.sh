echo abc | sed 's/b/[&]/'
