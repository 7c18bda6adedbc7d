whoami | wc -l
