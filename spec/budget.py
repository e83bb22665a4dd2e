"""How many examples the property tests draw: all of them under `make test` (and so in
CI), a third under `make check`, the quick loop while working, which sets
BUSBAR_TEST_QUICK=1 (docs/tests.md). The same properties are checked either way; the
quick loop only looks at fewer cases."""

from __future__ import annotations

import os

import pytest


def examples(full: int) -> int:
    if os.environ.get("BUSBAR_TEST_QUICK"):
        return max(5, full // 3)
    return full


# The property tests that draw the most (the state machines, the framing fuzz, the
# filters' interpreter): 15-30 s alone, 100-120 s within make test's load with coverage,
# where pytest-timeout's default 120 s once cut one. The timeout guards against a hang,
# not a speed.
MANY_EXAMPLES = pytest.mark.timeout(600)
