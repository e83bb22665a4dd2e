"""`python -m workers` is `busbar worker`."""

import sys

from busbar.cli import main

raise SystemExit(main(["worker", *sys.argv[1:]]))
