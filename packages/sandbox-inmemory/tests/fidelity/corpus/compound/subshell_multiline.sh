mkdir sub
(
  cd sub || exit 1
  pwd
)
pwd
