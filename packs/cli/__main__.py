"""`python -m packs.cli`: the same as `kpack`."""

import sys

from packs.cli import main

sys.exit(main())
