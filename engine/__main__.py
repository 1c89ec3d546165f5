"""`python -m engine run|sweep ...`: see engine/cli.py."""

import sys

from engine.cli import main

sys.exit(main())
