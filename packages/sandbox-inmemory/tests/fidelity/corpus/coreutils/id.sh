id -u | grep -Ec '^[0-9]+$'
id -un | wc -l
