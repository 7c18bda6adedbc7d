bash tool.sh run
source ./tool.sh
helper sourced
