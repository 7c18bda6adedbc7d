bash ./where.sh
