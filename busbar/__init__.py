"""The `busbar` command line (busbar/cli.py); the product itself lives in app/, workers/,
jobs/, spark/, config/ and dev/."""
