seq 5 | sed '2d;4d'
