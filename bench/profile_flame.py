"""A flame graph as a small static SVG, drawn from py-spy's collapsed stacks.

py-spy writes one format a run, and its own SVG is built for a browser (its script
zooms and searches); the docs embed the picture as an image, where no script runs.
Drawn here from the same samples bench.profile_spy counts, the picture and the figures
in docs/performance.md cannot disagree. The usual layout: the outermost frame at the
bottom, each frame as wide as its share of the samples, its callers below it; frames
narrower than MIN_SHARE are left out (they would be slivers, and the file stays small).
busbar's own code (app/, workers/, jobs/, config/) is drawn in orange, the rest in
greys, so what is ours stands out; each frame's title gives its samples and share.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

from bench.profile_spy import Stacks, where

WIDTH, ROW, TOP = 1200, 16, 36  # px: drawing width, a frame's height, room for the title
MIN_SHARE = 0.002
CHAR = 6.2  # px a character takes at font-size 11, near enough
OURS = ("app/", "workers/", "jobs/", "config/", "busbar/")


@dataclass
class Node:
    name: str
    count: int = 0
    children: dict[str, Node] = field(default_factory=dict)


def tree(stacks: Stacks) -> Node:
    root = Node("all")
    for frames, count in stacks.items():
        node = root
        node.count += count
        for frame in frames:
            node = node.children.setdefault(frame, Node(frame))
            node.count += count
    return root


def colour(name: str) -> str:
    """Orange shades for busbar's code, greys for the rest; the same name, the same shade."""
    shade = zlib.crc32(name.encode()) % 40
    if where(name).startswith(OURS):
        return f"rgb({215 + shade // 2},{120 + shade},{40 + shade})"
    return f"rgb({175 + shade},{175 + shade},{185 + shade})"


def depth(node: Node, least: int) -> int:
    kept = [c for c in node.children.values() if c.count >= least]
    return 1 + max((depth(c, least) for c in kept), default=0)


def svg(stacks: Stacks, heading: list[str]) -> str:
    """The flame graph of `stacks`, headed by two lines: what was sampled, and how."""
    root = tree(stacks)
    every = max(1, root.count)
    least = max(1, int(every * MIN_SHARE))
    height = TOP + depth(root, least) * ROW + 4
    scale = WIDTH / every
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="monospace" font-size="11">',
        f'<rect width="{WIDTH}" height="{height}" fill="#fdfdf8"/>',
        f'<text x="4" y="14" font-size="12">{escape(heading[0])}</text>',
        f'<text x="4" y="29" fill="#444">{escape(heading[1])}; {every:,} samples; frames '
        f"under {100 * MIN_SHARE:.1f}% left out; busbar's own code in orange</text>",
    ]

    def draw(node: Node, x: float, level: int) -> None:
        w, y = node.count * scale, height - 4 - (level + 1) * ROW
        share = 100 * node.count / every
        fits = int((w - 4) / CHAR)
        label = node.name if len(node.name) <= fits else node.name[: fits - 2] + ".."
        out.append(
            f"<g><title>{escape(node.name)}: {node.count:,} samples, {share:.1f}%</title>"
            f'<rect x="{x:.1f}" y="{y}" width="{max(w - 0.5, 0.5):.1f}" height="{ROW - 1}" '
            f'fill="{colour(node.name)}"/>'
            + (f'<text x="{x + 2:.1f}" y="{y + 11}">{escape(label)}</text>' if w > 5 * CHAR else "")
            + "</g>"
        )
        for child in sorted(node.children.values(), key=lambda c: c.name):
            if child.count >= least:
                draw(child, x, level + 1)
            x += child.count * scale

    draw(root, 0.0, 0)
    return "\n".join([*out, "</svg>", ""])


def write(stacks: Stacks, heading: list[str], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(svg(stacks, heading))
    return path
