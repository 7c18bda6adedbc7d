bash dir/tool.sh
