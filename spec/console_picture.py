"""What docs/console.png is made from, summed: the console's files and the script that
takes the picture (spec/integration/screenshot.py). The sum is kept beside the picture
(`console.png.sha256`); `make docs` takes the picture again when they differ, and
spec/app/web/test_console_picture.py fails while they do."""

from __future__ import annotations

import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PICTURE = ROOT / "docs" / "console.png"
INPUTS = [
    ROOT / "app" / "web" / "console_assets",
    ROOT / "app" / "web" / "console.py",
    ROOT / "spec" / "integration" / "screenshot.py",
]


def inputs_sum() -> str:
    """sha256 over every input file's path (from the root) and bytes, in path order."""
    digest = hashlib.sha256()
    files = sorted(p for i in INPUTS for p in ([i] if i.is_file() else i.rglob("*")))
    for path in (p for p in files if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def stamp_of(picture: Path) -> Path:
    return picture.with_name(picture.name + ".sha256")


def recorded(picture: Path = PICTURE) -> str:
    stamp = stamp_of(picture)
    return stamp.read_text().split()[0] if stamp.exists() else ""
