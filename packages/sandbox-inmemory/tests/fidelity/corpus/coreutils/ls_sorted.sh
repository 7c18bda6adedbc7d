touch b a C
ls
