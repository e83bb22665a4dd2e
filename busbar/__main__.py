"""`python -m busbar ...` is the `busbar` command."""

from busbar.cli import main

raise SystemExit(main())
