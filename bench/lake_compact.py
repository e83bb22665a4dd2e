"""What compaction buys the lake's readers (spark/lake_compact.py): a table as a running
ingest leaves it, one small file per micro-batch, read before and after the keeper's
compaction.

`--files` micro-batches of `--rows` events each (bench/lake_erasure.py's rows: real
columns, one date) are appended as the ingest does, one commit each. Then, before and
after `lake_compact.compact`: the time to find one url's rows (the query an erasure runs:
every file scanned, `url` having no statistics) and to read the whole table, medians of
`--repeat`; the compaction's own time; and an erasure's rewrite after it.

    .venv/bin/python -m bench.lake_compact                 # 2,000 files of 100 events
    .venv/bin/python -m bench.lake_compact --files 300     # quicker
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from bench.lake_erasure import HOSTS, rows
from spark import delta, lake_compact, lake_erase
from spark.tables import EVENTS


def build(path: str, files: int, per_file: int) -> float:
    """The table, a commit per micro-batch; how long it took."""
    started = time.perf_counter()
    delta.ensure(path, EVENTS)
    total = files * per_file
    for n in range(files):
        write_deltalake(path, rows(n * per_file, per_file, total, 1), mode="append",
                        partition_by=[delta.PARTITION])  # fmt: skip
    return time.perf_counter() - started


def timed(what: Callable[[], object], repeat: int) -> float:
    took = []
    for _ in range(repeat):
        started = time.perf_counter()
        what()
        took.append(time.perf_counter() - started)
    return statistics.median(took)


def readers(path: str, url: str, repeat: int) -> tuple[float, float, int]:
    """(the url's query, a whole read) median seconds, and the table's file count."""
    sql = f"SELECT stream_id FROM t WHERE url = '{url}'"

    def query() -> object:
        return lake_erase.query(DeltaTable(path), sql)

    def read() -> object:
        return pa.table(DeltaTable(path).to_pyarrow_table())

    return timed(query, repeat), timed(read, repeat), len(delta.current_files(path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2_000)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lake = f"{tmp}/lake"
        path = f"{lake}/events"
        built = build(path, args.files, args.rows)
        middle = args.files * args.rows // 2  # one event's url, in the middle file
        url = f"https://{HOSTS[middle % len(HOSTS)].as_py()}/{middle}"
        victim = lake_erase.Erasure(
            "bench", "url", url, (), 2**62, "running", int(time.time() * 1e3)
        )
        print(f"lake: {args.files * args.rows:,} events in {args.files:,} micro-batch files, "
              f"one date, built in {built:.0f} s")  # fmt: skip
        q0, r0, f0 = readers(path, url, args.repeat)
        started = time.perf_counter()
        done = lake_compact.compact(lake)
        took = time.perf_counter() - started
        removed = lake_erase.vacuum(lake, 0)
        q1, r1, f1 = readers(path, url, args.repeat)
        print(f"compaction: {took:.2f} s, {done['files_removed']:,} files into "
              f"{done['files_added']}; vacuum removed {removed:,}")  # fmt: skip
        outcome = lake_erase.erase(lake, victim)
        print(f"an erasure after it: {outcome['events']} events, {outcome['files_rewritten']} "
              f"file(s) rewritten, {outcome['bytes_rewritten'] / 1e6:.1f} MB")  # fmt: skip
        print(f"\n{'':24}{'files':>8}{'url query, s':>14}{'whole read, s':>15}")
        print(f"{'micro-batch files':24}{f0:>8,}{q0:>14.3f}{r0:>15.3f}")
        print(f"{'compacted':24}{f1:>8,}{q1:>14.3f}{r1:>15.3f}")
        print(f"{'before / after':24}{'':>8}{q0 / q1:>13.1f}x{r0 / r1:>14.1f}x")
        print(f"(medians of {args.repeat}; {Path(tmp).name} removed)")


if __name__ == "__main__":
    main()
