"""``python -m orchestrator.demo``: build the demo project and run its tickets."""

import sys

from orchestrator.demo.run import main

sys.exit(main())
