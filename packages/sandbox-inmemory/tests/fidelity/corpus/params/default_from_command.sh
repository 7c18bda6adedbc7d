echo "${UNDEF:-$(echo computed)}"
