"""The repository stands alone: nothing in it cites a document it does not hold (the
design notes it grew from live outside it; what a reader needs of them is in docs/), and
every docs/ page that code or docs name exists."""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = re.compile(
    r"DESIGN\.md|DESIGN (section )?\d|\bseed \d{3}\b|seeds/|PLATFORM\.md|HOUSE\.md|PEERS\.md"
    r"|\.\./shared"
)
DOCS_PAGE = re.compile(r"\bdocs/[\w./-]+\.(?:md|png)")


@functools.cache
def tracked_text() -> dict[str, str]:
    names = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    texts = {}
    for name in names:
        path = ROOT / name
        if name == "spec/test_citations.py" or not path.is_file():
            continue
        try:
            texts[name] = path.read_text()
        except UnicodeDecodeError:
            continue  # images, parquet fixtures
    return texts


def test_nothing_cites_a_document_the_repository_lacks() -> None:
    found = [
        f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group()}"
        for name, text in tracked_text().items()
        for m in OUTSIDE.finditer(text)
    ]
    assert found == [], "cites documents outside the repository:\n" + "\n".join(found)


def test_every_docs_page_named_exists() -> None:
    missing = sorted(
        {
            f"{name}: {m.group()}"
            for name, text in tracked_text().items()
            for m in DOCS_PAGE.finditer(text)
            if not (ROOT / m.group()).exists()
        }
    )
    assert missing == [], "names docs/ pages that do not exist:\n" + "\n".join(missing)
