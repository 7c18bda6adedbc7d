mkdir d
cd d | true
pwd
