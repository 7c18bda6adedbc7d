echo hello | sed 'y/el/ip/'
