touch -d '2024-01-02 03:04:05' f
date -r f '+%F %T'
