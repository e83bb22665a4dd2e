"""The map matches the code: docs/layout.md's tree names every module of the packages it
lists and nothing that is not there; every repository path a document, a docstring, a
comment or pyproject.toml names exists, and so does every name they give a module. A
module added, moved or removed without its line in the map, or a doc left pointing at
a file or a name that is gone, fails here instead of misleading the next reader."""

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


# a module's name for a thing in it, as the docs and docstrings write one:
# `app/delivery/shaper.py's Shaper`, `spark/delta.py`'s `current_files`
NAMED = re.compile(
    r"(?<![\w./-])((?:app|workers|jobs|spark|config|dev|busbar|bench|clients)/[\w./-]*?"
    r"\.(?:py|lua))`?'s (`?)([A-Za-z_][\w.]*)"
)
# ... or `name` in app/web/worker.py
NAMED_IN = re.compile(
    r"`([A-Za-z_][\w.]*)(?:\(\))?` in `?((?:app|workers|jobs|spark|config|dev|busbar|bench|"
    r"clients)/[\w./-]*?\.(?:py|lua))(?![\w/-])"
)
LUA_DEFINES = re.compile(r"^\s*(?:local\s+)?(?:function\s+([\w.:]+)|([\w.]+)\s*=)", re.MULTILINE)


def code_like(name: str, quoted: bool) -> bool:
    """A name the sentence means as code, not an English word after the path: quoted,
    or spelt as code is (snake_case, CamelCase, CONSTANT)."""
    return quoted or "_" in name or name[:1].isupper()


def defined_in(path: Path) -> set[str]:
    """Every name a module defines anywhere (functions, classes, methods, assignments,
    imports) or, for a Lua file, every function and assigned name."""
    text = path.read_text()
    if path.suffix == ".lua":
        return {part for m in LUA_DEFINES.finditer(text) for part in
                re.split(r"[.:]", m.group(1) or m.group(2))}  # fmt: skip
    names: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)  # self.x = ...
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def test_every_name_a_doc_gives_a_module_exists_in_it():
    """`path's name` (or "`name` in path") in a document, a docstring or a comment: the
    name is defined in that module (a function, class, method, constant or attribute;
    for Lua, a function or an assignment). A rename that left a doc pointing at the old
    name fails here."""
    missing = []
    for source in sources():
        text = WRAPPED.sub("/", source.read_text(errors="replace"))
        named = [(m.group(1), bool(m.group(2)), m.group(3)) for m in NAMED.finditer(text)]
        named += [(m.group(2), True, m.group(1)) for m in NAMED_IN.finditer(text)]
        for path, quoted, name in named:
            name = name.rstrip(".")
            target = ROOT / path
            if not code_like(name, quoted) or not target.is_file():
                continue  # an English word; a missing path is the test above's to name
            if any(part not in defined_in(target) for part in name.split(".")):
                missing.append(f"{source.relative_to(ROOT)}: {path}'s {name}")
    assert sorted(set(missing)) == []
