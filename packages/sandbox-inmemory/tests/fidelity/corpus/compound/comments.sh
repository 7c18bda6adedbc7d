# a comment line
echo a#b   # trailing comment
echo 'not # a comment'
  # indented comment
echo "done" # end
