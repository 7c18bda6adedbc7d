TZ=JST-9 date -d @0 '+%H:%M %Z'
date -u -d @0 '+%H:%M %Z'
