"""How many examples the property tests draw: all of them under `make test` (and so in
CI), a third under `make check`, the quick loop while working, which sets
BUSBAR_TEST_QUICK=1 (docs/tests.md). The same properties are checked either way; the
quick loop only looks at fewer cases."""

from __future__ import annotations

import os


def examples(full: int) -> int:
    if os.environ.get("BUSBAR_TEST_QUICK"):
        return max(5, full // 3)
    return full
