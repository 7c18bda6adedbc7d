sort | uniq -c
