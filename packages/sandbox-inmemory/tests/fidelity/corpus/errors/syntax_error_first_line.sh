echo start; fi
