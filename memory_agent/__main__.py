import sys

from memory_agent.entry import main

sys.exit(main())
