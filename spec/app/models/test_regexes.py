"""Why a pattern is refused (app/models/regexes.py): RE2's own text, and, for the features
no linear-time engine has (backreferences, lookaround), which one it is."""

from __future__ import annotations

import pytest

from app.models.regexes import refusal


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("(a)\\1", "invalid escape sequence: \\1 (a backreference: "),
        ("(?<n>a)\\k<n>", "invalid escape sequence: \\k (a backreference: "),
        ("(?P<n>a)(?P=n)", "invalid perl operator: (?P (a backreference: "),
        ("a(?=b)", "invalid perl operator: (?= (a lookaround: "),
        ("a(?!b)", "invalid perl operator: (?! (a lookaround: "),
        ("(?<=a)b", "invalid perl operator: (?<= (a lookaround: "),
        ("(?<!a)b", "invalid perl operator: (?<! (a lookaround: "),
    ],
)
def test_a_backreference_or_a_lookaround_is_named_as_one(pattern: str, why: str):
    found = refusal(pattern)
    assert found is not None and found.startswith(why)
    assert found.endswith("busbar's patterns run in linear time, so no backreferences and no "
                          "lookaround)")  # fmt: skip


@pytest.mark.parametrize(
    ("pattern", "why"),
    [("(a", "missing ): (a"), ("a**", "bad repetition operator: **"), ("[z-a]", "invalid "
     "character class range: z-a"), ("(?P<n>a)(?P>n)", "invalid perl operator: (?P")],
)  # fmt: skip
def test_any_other_refusal_is_re2s_own_text(pattern: str, why: str):
    assert refusal(pattern) == why


def test_a_pattern_re2_takes_has_no_refusal():
    assert refusal("^[A-Z]{3}-[0-9]+$") is None
