"""`python -m flows.cli`: the same as `kpack`."""

import sys

from flows.cli import main

sys.exit(main())
