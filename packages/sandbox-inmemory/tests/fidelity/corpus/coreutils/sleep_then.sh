sleep 0.1 && echo slept
