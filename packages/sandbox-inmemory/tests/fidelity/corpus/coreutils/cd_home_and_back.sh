cd
pwd
cd -
pwd
