echo "sourced with $# args: $1 $2"
