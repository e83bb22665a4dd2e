"""`python -m busbar ...` is the `busbar` command."""

from busbar.cli import main

# guarded: a process pool's children (app/delivery/shaping.py's, spawned) import this
# module again as `__mp_main__`, and must not run a second busbar in each
if __name__ == "__main__":
    raise SystemExit(main())
