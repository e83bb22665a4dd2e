"""`python -m workers` is `busbar worker`."""

from workers.cli import main

raise SystemExit(main(["worker"]))
