"""docs/console.png shows the console as it is: taken from the console's files as they
are now (spec/console_picture.py). A change to the console without a new picture fails
here, saying how to take one (`make docs` does it)."""

from __future__ import annotations

from spec.console_picture import PICTURE, inputs_sum, recorded


def test_the_console_picture_was_taken_of_this_console():
    assert PICTURE.exists()
    assert recorded() == inputs_sum(), (
        "docs/console.png was taken of another console: run `make docs` (it takes the "
        "picture again, about two minutes) and commit docs/console.png and its .sha256"
    )
