umask
