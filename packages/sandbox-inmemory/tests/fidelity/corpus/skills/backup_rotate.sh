bash rotate.sh
ls backups
