printf 'x y\0z\0' | xargs -0 -n1 echo
