"""``python -m lab.reliability.approvals``."""

import sys

from lab.reliability.approvals.cli import main

sys.exit(main())
