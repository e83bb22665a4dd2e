"""The `busbar` command line (busbar/cli.py); the product itself lives in app/, workers/,
jobs/, spark/, config/ and dev/.

Modules (docs/layout.md is the whole map; spec/test_map.py keeps both true):

    __main__.py         `python -m busbar`
    cli.py              a dispatcher to each process's main
"""
