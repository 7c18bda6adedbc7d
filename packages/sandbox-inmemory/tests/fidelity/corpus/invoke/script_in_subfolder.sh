bash bin/hello.sh
cd bin && bash hello.sh
