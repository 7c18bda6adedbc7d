mkdir d
touch d/.hidden d/f
ls -a d
