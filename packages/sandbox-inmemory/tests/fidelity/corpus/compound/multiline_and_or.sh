true &&
  echo yes ||
  echo no
false ||
  echo fallback
