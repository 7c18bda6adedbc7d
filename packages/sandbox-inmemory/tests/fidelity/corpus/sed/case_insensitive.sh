echo Hello | sed 's/hello/bye/I'
