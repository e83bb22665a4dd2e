"""MkDocs hook: BENCHMARKS.md (written by `python -m bench` at the repository's root) as
the site's page benchmarks.md, with its plots.

The pages link `../BENCHMARKS.md`, which is right on a Git host; on the site that file is
this generated page, so the links are pointed at it. The plots stay in bench/results/
and are copied under img/bench/.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "BENCHMARKS.md"
PAGE = "benchmarks.md"
PLOT = re.compile(r"\]\(bench/results/([\w.-]+\.png)\)")
LINK = "](../BENCHMARKS.md"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    text = SOURCE.read_text()
    for name in sorted(set(PLOT.findall(text))):
        plot = ROOT / "bench" / "results" / name
        files.append(File.generated(config, f"img/bench/{name}", abs_src_path=str(plot)))
    text = PLOT.sub(r"](img/bench/\1)", text)
    files.append(File.generated(config, PAGE, content=text))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return markdown.replace(LINK, f"]({PAGE}")
