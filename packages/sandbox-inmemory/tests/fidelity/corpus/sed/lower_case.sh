echo ABC | sed 's/.*/\L&/'
