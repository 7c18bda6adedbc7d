tr '[:lower:]' '[:upper:]'
