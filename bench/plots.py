"""PNG plots of the latency distributions the benchmarks kept (<results>/*.samples.json):
one figure per benchmark, one panel per group of series (the text before a label's
first comma), each series a CDF on a log time axis, so a p99 tail shows as plainly as
the median. matplotlib comes from the `bench` extra only: it is no runtime dependency.

    .venv/bin/python -m bench.plots
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench import common


def groups(series: dict[str, dict]) -> dict[str, dict[str, dict]]:
    """Series by panel: 'throughput, 1 sub' and 'throughput, 50 subs' share one."""
    out: dict[str, dict[str, dict]] = {}
    for label, data in series.items():
        head, _, rest = label.partition(", ")
        panel, name = (head, rest) if rest else ("", label)
        out.setdefault(panel, {})[name] = data
    return out


def tick(value: float, _: object) -> str:
    """Plain numbers on the log axis, only at 1, 2 and 5 x 10^k: readable, not crowded."""
    mantissa = f"{value:.0e}"[0]
    return f"{value:g}" if mantissa in "125" else ""


def plot(source: Path, target: Path) -> None:
    """One PNG for one samples file."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot as plt
    from matplotlib.ticker import FuncFormatter

    kept = json.loads(source.read_text())
    panels = groups(kept["series"])
    height = sum(3.2 + 0.16 * len(series) for series in panels.values())
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, height), squeeze=False)
    for ax, (panel, series) in zip(axes[:, 0], panels.items(), strict=True):
        for case, data in series.items():
            q = data["quantiles"]
            last = len(q) - 1
            p50, p99 = q[last // 2], q[last * 99 // 100]
            label = f"{case} (n={data['n']:,}, p50 {p50:,.1f}, p99 {p99:,.1f})"
            ax.plot([max(x, 0.01) for x in q], [i / last for i in range(len(q))], label=label)
        ax.set_xscale("log")
        for axis_format in (ax.xaxis.set_major_formatter, ax.xaxis.set_minor_formatter):
            axis_format(FuncFormatter(tick))
        ax.set_xlabel(f"latency, {kept['unit']} (log scale)")
        ax.set_ylabel("fraction of events")
        ax.set_ylim(0, 1.0)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(
            f"{source.name.split('.')[0]}: {panel}" if panel else source.name.split(".")[0]
        )
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.2), frameon=False)
    fig.tight_layout()
    fig.savefig(target, dpi=90, bbox_inches="tight")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Every samples file in the results folder; a missing matplotlib is an error that
    says how to get it, not a traceback."""
    common.quick_flag("bench.plots", __doc__, argv)  # accepted for uniformity, no effect
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("matplotlib is missing: pip install -e '.[bench]'", file=sys.stderr)
        return 1
    for source in sorted(common.results_dir().glob("*.samples.json")):
        target = source.with_name(source.name.replace(".samples.json", "-latency.png"))
        plot(source, target)
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
