import sys

from legal_web.server import main

sys.exit(main())
