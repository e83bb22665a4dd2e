"""The README and the docs/ pages stay true: the walkthrough has a curl example for every
endpoint the app serves, every file of the repository they name exists, every link of
the README reaches a file, and every page is in the site's nav (mkdocs.yml).

A link between pages, or to a page that is not there, is checked by the site's strict
build (`make docs`, part of `make test`), anchors included."""

from __future__ import annotations

import re
from pathlib import Path

from flask import Flask

from app.web import create_app
from config.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()
PATH = re.compile(r"\$API(/[^\s'\"|]*)")
NAMED = re.compile(r"`((?:app|workers|jobs|spark|config|dev|busbar|bench|spec|clients)/[\w./]+)`")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def pages() -> dict[Path, str]:
    return {path: path.read_text() for path in sorted(DOCS.glob("*.md"))}


def walkthrough() -> str:
    return (DOCS / "walkthrough.md").read_text()


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
            examples.append((method.group(1) if method else "GET", path.group(1).split("?")[0]))
    missing = sorted(
        (method, rule)
        for method, rule in endpoints(app)
        if not any(m == method and matches(rule, p) for m, p in examples)
    )
    assert missing == []


def test_every_file_the_readme_and_the_pages_name_exists():
    texts = {ROOT / "README.md": README, **pages()}
    named = {(where.name, p) for where, text in texts.items() for p in NAMED.findall(text)}
    assert len(named) > 50
    assert sorted((where, p) for where, p in named if not (ROOT / p).exists()) == []


def test_every_link_of_the_readme_reaches_a_file():
    targets = [t for t in LINK.findall(README) if not re.match(r"https?:", t)]
    assert "docs/index.md" in targets and "docs/img/processes.svg" in targets
    assert [t for t in targets if not (ROOT / t).is_file()] == []


def test_the_readme_links_every_page():
    linked = set(LINK.findall(README))
    assert [p.name for p in pages() if f"docs/{p.name}" not in linked] == []


def test_every_page_is_in_the_nav():
    config = (ROOT / "mkdocs.yml").read_text()
    nav = set(re.findall(r"^\s+- [^:\n]+: ([\w./-]+\.md)$", config[config.index("\nnav:") :], re.M))
    assert [p.name for p in pages() if p.name not in nav] == []
    # benchmarks.md is made from BENCHMARKS.md at build time (docs/hooks/benchmarks_page.py)
    assert nav - {p.name for p in pages()} == {"benchmarks.md"}


def test_the_readme_stays_a_front_door():
    assert len(README.splitlines()) <= 250
