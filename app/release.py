"""What this release is: its version and the Redis layout it reads and writes.

The version has one source, setup.cfg's `version`, read back from the installed
package's metadata: `busbar --version`, `/health`, the OpenAPI document, the console's
footer and the image's label all show this one (CHANGELOG.md says what each changed).

LAYOUT numbers the Redis layout (app/models/keys.py's docstring): the keys, what they
hold and the job states the scripts move them through. It goes up by one whenever a
release changes any of that in a way a process of the release before could misread,
and that release's CHANGELOG.md entry says so, with its migration
(app/models/layout.py). A store records the layout it holds (`P{c}:meta`, field
`layout`); a process refuses to start against a layout newer than its own
(app/models/meta.py). docs/operating.md, Releases and upgrades, is the operator's
account.
"""

from __future__ import annotations

import functools
from importlib import metadata

# 1: every layout up to and including 0.2.0's (a store written before layouts were
# numbered is taken as 1: docs/operating.md says what that means for older stores)
LAYOUT = 1


@functools.cache  # read once a process: looking it up costs more than /health's own work
def version() -> str:
    """The installed distribution's version (setup.cfg's)."""
    try:
        return metadata.version("busbar")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"
