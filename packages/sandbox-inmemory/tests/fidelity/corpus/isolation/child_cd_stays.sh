mkdir d
bash -c 'cd d'
pwd
