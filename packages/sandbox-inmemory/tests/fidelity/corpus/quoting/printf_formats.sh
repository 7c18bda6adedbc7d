printf '%5s|%-5s|%03d|%x|%.2f\n' ab cd 7 255 3.14159
printf '%s\n' one two
printf '%b\n' 'tab\there'
