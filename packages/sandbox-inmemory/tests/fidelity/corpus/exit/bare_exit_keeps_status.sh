echo x
false
exit
