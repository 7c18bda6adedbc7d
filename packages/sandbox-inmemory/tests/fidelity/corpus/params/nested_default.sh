echo "${A:-${B:-inner}}"
