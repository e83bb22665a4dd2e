"""The map matches the code: docs/layout.md's tree names every module of the packages it
lists and nothing that is not there, and every repository path a document, a docstring,
a comment or pyproject.toml names exists. A module added, moved or removed without its
line in the map, or a doc left pointing at a file that is gone, fails here instead of
misleading the next reader."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("app", "workers", "jobs", "spark", "config", "dev", "busbar")
# a path in the repository, as the docs and the code name one: a top-level folder, then
# a file with one of the repository's extensions
PATH = re.compile(
    r"(?<![\w./-])((?:app|workers|jobs|spark|config|dev|busbar|bench|spec|docs|clients)"
    r"/[\w./-]*?\.(?:py|lua|md|js|css|html|toml|yml|yaml|json|png|sh))(?![\w/-])"
)
SCANNED = ("app", "workers", "jobs", "spark", "config", "dev", "busbar", "bench", "spec",
           "docs", "clients")  # fmt: skip
SUFFIXES = {".py", ".md", ".lua", ".js", ".toml", ".yml", ".html", ".css"}


def tree() -> set[str]:
    """The module paths layout.md's code block names: each line a name, its depth set by
    its indentation (two spaces a level); a folder ends in `/`."""
    text = (ROOT / "docs" / "layout.md").read_text()
    block = text.split("```", 2)[1]
    named: set[str] = set()
    stack: list[str] = []
    for line in block.splitlines():
        if not line.strip() or line.startswith(" " * 20):  # empty, or a description going on
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2
        name = line.split()[0]
        stack = stack[:depth]
        if name.endswith("/"):
            stack.append(name.rstrip("/"))
        elif name.endswith(".py"):
            named.add("/".join([*stack, name]))
    return named


def modules() -> set[str]:
    return {
        str(p.relative_to(ROOT))
        for package in PACKAGES
        for p in (ROOT / package).rglob("*.py")
        if p.name != "__init__.py"
    }


def test_the_layout_names_every_module_and_only_those():
    listed = {path for path in tree() if path.split("/")[0] in PACKAGES}
    assert sorted(modules() - listed) == [], "modules missing from docs/layout.md"
    assert sorted(listed - modules()) == [], "docs/layout.md names modules that do not exist"


def sources() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "Makefile", ROOT / "mkdocs.yml"]
    for top in SCANNED:
        found += [
            p for p in (ROOT / top).rglob("*")
            if p.suffix in SUFFIXES and p.is_file() and ".venv" not in p.parts
        ]  # fmt: skip
    return found


# a path broken over two lines of a docstring or comment: `app/services/` then, on the
# next line, `deliver.py` (after the comment's marker, if any)
WRAPPED = re.compile(r"/\n[ \t]*(?:#|--|//)?[ \t]*")


def test_every_path_a_doc_or_the_code_names_exists():
    missing = []
    for source in sources():
        text = source.read_text(errors="replace")
        for found in PATH.finditer(WRAPPED.sub("/", text)):
            path = found.group(1)
            if "*" in path or "<" in path:  # a pattern, or a placeholder
                continue
            if not (ROOT / path).exists() and not (ROOT / "clients" / "python" / path).exists():
                missing.append(f"{source.relative_to(ROOT)}: {path}")
    assert missing == []


def test_each_package_docstring_names_its_modules():
    """The docstring of each package (its __init__.py) lists its modules and packages,
    as layout.md does: reading a package starts there."""
    unnamed = {}
    for package in PACKAGES:
        for init in sorted((ROOT / package).rglob("__init__.py")):
            folder = init.parent
            doc = ast.get_docstring(ast.parse(init.read_text())) or ""
            children = [p.name for p in folder.glob("*.py") if p.name != "__init__.py"]
            children += [f"{p.name}/" for p in folder.iterdir() if (p / "__init__.py").exists()]
            missing = [name for name in children if not re.search(rf"^\s+{re.escape(name)}\s",
                                                                   doc, re.MULTILINE)]  # fmt: skip
            if missing:
                unnamed[str(folder.relative_to(ROOT))] = sorted(missing)
    assert unnamed == {}
