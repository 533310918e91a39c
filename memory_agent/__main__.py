import sys

from memory_agent.cli import main

sys.exit(main())
