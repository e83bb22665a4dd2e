"""The README stays true: its walkthrough has a curl example for every endpoint the app
serves, and every file of the repository it names exists."""

from __future__ import annotations

import re
from pathlib import Path

from flask import Flask

from app.web import create_app
from config.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
PATH = re.compile(r"\$API(/[^\s'\"|]*)")


def walkthrough() -> str:
    start = README.index("## Walkthrough")
    return README[start : README.index("\n## ", start + 1)]


def endpoints(app: Flask) -> set[tuple[str, str]]:
    found = set()
    for rule in app.url_map.iter_rules():
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            found.add((method, re.sub(r"<[^>]+>", "*", rule.rule)))
    return found


def matches(pattern: str, path: str) -> bool:
    return re.fullmatch(re.escape(pattern).replace(r"\*", r"[^/]+"), path) is not None


def test_the_walkthrough_has_a_curl_example_for_every_endpoint(redis_url: str):
    app = create_app(Settings(redis_url=redis_url, root_key="readme-root-key-1"))
    examples = []
    for line in walkthrough().splitlines():
        if "curl " in line and (path := PATH.search(line)):
            method = re.search(r"-X (\w+)", line)
            examples.append((method.group(1) if method else "GET", path.group(1)))
    missing = sorted(
        (method, rule)
        for method, rule in endpoints(app)
        if not any(m == method and matches(rule, p) for m, p in examples)
    )
    assert missing == []


def test_every_file_the_readme_names_exists():
    named = re.findall(r"`((?:app|workers|jobs|spark|config|dev|busbar|bench|spec)/[\w./]+)`",
                       README)  # fmt: skip
    named += re.findall(r"\]\(([\w.]+\.md)\)", README)
    assert named and [p for p in named if not (ROOT / p).exists()] == []
