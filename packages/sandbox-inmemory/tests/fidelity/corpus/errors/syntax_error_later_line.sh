echo start
if then
