echo 'key=value' | awk '{i = index($0, "="); print substr($0, 1, i - 1), substr($0, i + 1)}'
