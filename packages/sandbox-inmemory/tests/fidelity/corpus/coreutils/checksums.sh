printf abc | md5sum
printf abc | sha256sum
