"""`python -m cli`: the same as the `evalsweep` console script."""

import sys

from cli.main import main

sys.exit(main())
