printf '#!/bin/sh\necho made and ran\n' > m.sh
chmod +x m.sh
./m.sh
