echo '[[1,true,"a"],[2,false,null]]' | jq -r '.[] | @csv'
