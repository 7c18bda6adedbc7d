sh -c 'echo "$0|$1|$2|$#"' zero one "two words"
