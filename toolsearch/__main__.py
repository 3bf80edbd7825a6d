"""``python -m toolsearch``: the same as the ``toolsearch`` command."""

import sys

from toolsearch.cli import main

sys.exit(main())
