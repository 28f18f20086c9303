"""`python -m rankgym` runs the CLI."""

import sys

from rankgym.cli import main

sys.exit(main())
