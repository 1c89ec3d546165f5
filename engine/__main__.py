"""`python -m engine run|sweep ...`: see engine/cli/main.py."""

import sys

from engine.cli.main import main

sys.exit(main())
