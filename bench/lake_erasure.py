"""Erasing one url from the lake (issue 56): a Delta table's delete rewrites only the files
holding the url's rows, where the streaming file sink's layout had to rewrite them all.

An `events` table of `EVENTS` rows in `FILES` appends (one file each, dates over `DAYS`
days, stream ids rising as the ingest writes them) is built with pyarrow and delta-rs,
no Spark. Each of `URLS` urls has `PER_FILE` rows in each of `HOLDING` files (first,
middle and last of the table). Measured: the full rewrite without the first url's rows
(the old layout's cost: every file read and written again, into a copy), then
`spark.lake_erase.erase` of each url in turn (its query timed alone first, its delete
commit's time from the log's metrics), checked against the Delta log (exactly the holding
files gone); then vacuum, and no file left holding the urls (raw bytes, log included, and
the Parquet files' `url` as read).

    .venv/bin/python -m bench.lake_erasure                  # 10,000,000 events, 200 files
    .venv/bin/python -m bench.lake_erasure --quick          # 200,000 events, 20 files
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from bench.measure import spread
from spark import delta, lake_erase
from spark.lake_erase import Erasure
from spark.tables import EVENTS

START_MS = 1_795_651_200_000  # 2026-11-23 00:00 UTC
DAY_MS = 86_400_000
BATCH = 10  # events per delivered batch: one stream entry, one batch_id
SHARDS, SUBSCRIBERS = 4, 20
TOPICS = pa.array(["t_people", "t_orders", "t_stock"])
TYPES = pa.array(["create", "update", "update", "delete"])
# urls on several hosts, the erased ones' among them in order: each file's Parquet min/max
# of `url` spans theirs, so no file is skipped by its footer as a lake's would not be
HOSTS = pa.array(["api.a.test", "m.test", "o.test", "shop.test", "www.z.test"])
ALPHABET = pa.array(list("abcdefghijklmnopqrstuvwxyz234567"))
SCHEMA = delta.arrow_schema(EVENTS)


def erased_url(k: int) -> str:
    return f"https://people.test/erased-{k}"


def ints(first: int, count: int) -> pa.Array:
    """first, first + 1, ... (`count` of them), as int64."""
    return pc.add(pc.cumulative_sum(pa.nulls(count, pa.int64()).fill_null(1)), first - 1)


def mod(values: pa.Array, by: int) -> pa.Array:
    return pc.subtract(values, pc.multiply(pc.divide(values, by), by))


def text(values: pa.Array) -> pa.Array:
    return values.cast(pa.string())


def draws(count: int, below: int, seed: int) -> pa.Array:
    """`count` random integers in [0, below)."""
    return pc.floor(pc.multiply(pc.random(count, initializer=seed), below)).cast(pa.int64())


def letters(count: int, width: int, seed: int) -> pa.Array:
    """`count` random base32 strings of `width` characters (an event id, a token)."""
    codes = ALPHABET.take(draws(count * width, len(ALPHABET), seed))
    return join(*(codes.slice(i * count, count) for i in range(width)))


def join(*parts: pa.Array | str) -> pa.Array:
    return pc.binary_join_element_wise(*parts, "")


def rows(first: int, count: int, total: int, days: int) -> pa.Table:
    """Rows `first`..`first + count` of `total`, as the ingest writes them: BATCH events a
    stream entry, entries round the shards, ids and times rising over `days` days."""
    g = ints(first, count)
    entry = pc.divide(g, BATCH)
    ms = pc.add(pc.divide(pc.multiply(entry, days * DAY_MS), -(-total // BATCH)), START_MS)
    us = pc.multiply(ms, 1000)
    stamp = pa.timestamp("us", tz="UTC")
    columns = {
        "id": letters(count, 26, first),
        "subscriber": join("s", text(mod(entry, SUBSCRIBERS))),
        "topic": TOPICS.take(mod(entry, len(TOPICS))),
        "type": TYPES.take(mod(g, len(TYPES))),
        "url": join("https://", HOSTS.take(mod(g, len(HOSTS))), "/", text(g)),
        "t": pc.subtract(ms, 2_500),
        "data": join('{"n":', text(g), ',"email":"person', text(g), '@example.test","name":'
                     '"Person ', text(g), '","token":"', letters(count, 32, first + 1),
                     '","score":', text(draws(count, 10**6, first + 2)), "}"),
        "priority": pa.nulls(count, pa.int32()).fill_null(0),
        "batch_id": pc.divide(entry, SUBSCRIBERS),
        "position": mod(g, BATCH),
        "attempts": pa.nulls(count, pa.int32()).fill_null(1),
        "created_at": pc.subtract(us, 2_000_000).cast(stamp),
        "first_attempt_at": pc.subtract(us, 500_000).cast(stamp),
        "delivered_at": us.cast(stamp),
        "stream_partition": mod(entry, SHARDS),
        "stream_id": join(text(ms), "-0"),
        "date": pc.divide(ms, DAY_MS).cast(pa.int32()).cast(pa.date32()),
    }  # fmt: skip
    arrays = [columns.get(f.name, pa.nulls(count, f.type)).cast(f.type) for f in SCHEMA]
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def holders(files: int, holding: int, urls: int) -> list[list[int]]:
    """For each url, the files holding its rows: first, middle and last, shifted by url."""
    span = files - urls
    picks = [[round(j * span / max(holding - 1, 1)) + k for j in range(holding)]
             for k in range(urls)]  # fmt: skip
    assert len({i for p in picks for i in p}) == holding * urls, "too few files"
    return picks


def paths(table: DeltaTable) -> dict[str, int]:
    return lake_erase.sizes(table)


def build(path: str, events: int, files: int, days: int, per_file: int,
          picks: list[list[int]]) -> list[set[str]]:  # fmt: skip
    """The table, and for each url the files (paths in the log) holding its rows."""
    delta.ensure(path, EVENTS)
    per = events // files
    spots = pa.array([round(j * (per - 1) / max(per_file - 1, 1)) for j in range(per_file)])
    held: list[set[str]] = [set() for _ in picks]
    for i in range(files):
        data = rows(i * per, per, events, days)
        owners = [k for k, p in enumerate(picks) if i in p]
        for k in owners:
            url = pc.if_else(pc.is_in(ints(0, per), spots), erased_url(k), data.column("url"))
            data = data.set_column(SCHEMA.get_field_index("url"), "url", url)
        before = set(paths(DeltaTable(path))) if owners else set()
        write_deltalake(path, data, mode="append", partition_by=[delta.PARTITION])
        for k in owners:
            held[k] |= set(paths(DeltaTable(path))) - before
    return held


def full_rewrite(path: str, copy: str, url: str) -> tuple[float, int, int]:
    """The old layout's erasure: every row but the url's read and written again, as a new
    table; (seconds, files written, bytes written)."""
    delta.ensure(copy, EVENTS)
    started = time.perf_counter()
    source = DeltaTable(path).to_pyarrow_dataset()
    kept = source.scanner(filter=pc.field("url") != url).to_reader()
    write_deltalake(copy, kept, mode="overwrite", partition_by=[delta.PARTITION])
    took = time.perf_counter() - started
    written = paths(DeltaTable(copy))
    return took, len(written), sum(written.values())


def holding_bytes(root: Path, url: str) -> tuple[int, int]:
    """(files whose raw bytes contain the url, rows with it in the Parquet files as read)."""
    raw = sum(url.encode() in f.read_bytes() for f in root.rglob("*") if f.is_file())
    data = [f for f in root.rglob("*.parquet") if "_delta_log" not in f.parts]
    urls = [pq.read_table(f, columns=["url"]).column("url").cast(pa.string()) for f in data]
    return raw, sum(pc.sum(pc.equal(u, url)).as_py() or 0 for u in urls)


def erasure(k: int) -> Erasure:
    done_at = int(time.time() * 1000)  # Redis erased just now
    return Erasure(f"bench{k}", "url", erased_url(k), (), 2**62, "running", done_at)


def erase_one(lake: str, k: int, held: set[str]) -> dict[str, float]:
    """Url k's erasure, its query timed alone first; what it did, and what the log says."""
    path, one = f"{lake}/events", erasure(k)
    table = DeltaTable(path)
    started = time.perf_counter()
    lake_erase.query(table, f"SELECT stream_id FROM t WHERE {lake_erase.match_sql(one)}")
    asked = time.perf_counter() - started
    before = paths(table)
    started = time.perf_counter()
    outcome = lake_erase.erase(lake, one)
    took = time.perf_counter() - started
    table = DeltaTable(path)
    after, deleting = paths(table), table.history(1)[0]["operationMetrics"]["execution_time_ms"]
    gone, added = set(before) - set(after), set(after) - set(before)
    print(f"erase url {k}: {took:.2f} s (its query alone {asked:.2f} s, the delete commit "
          f"{deleting / 1e3:.2f} s), {outcome['events']} events, "
          f"{outcome['files_rewritten']} files rewritten, "
          f"{outcome['bytes_rewritten'] / 1e6:.1f} MB; the log: {len(gone)} files removed, "
          f"{len(added)} added, the holding files exactly: {gone == held}", flush=True)  # fmt: skip
    return {"s": took, "query_s": asked, "delete_s": deleting / 1e3,
            "files": outcome["files_rewritten"], "bytes": outcome["bytes_rewritten"],
            "written": sum(after[p] for p in added), "exact": gone == held}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lake_erasure")
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--files", type=int, default=200, help="appends, one file each")
    parser.add_argument("--holding", type=int, default=3, help="files holding each url's rows")
    parser.add_argument("--per-file", type=int, default=5, help="a url's rows in each")
    parser.add_argument("--urls", type=int, default=3, help="urls erased, one at a time")
    parser.add_argument("--days", type=int, default=4, help="the `date` partitions")
    parser.add_argument("--quick", action="store_true", help="200,000 events in 20 files")
    args = parser.parse_args()
    if args.quick:
        args.events, args.files = 200_000, 20
    picks = holders(args.files, args.holding, args.urls)
    with tempfile.TemporaryDirectory() as work:
        lake, began = f"{work}/lake", time.perf_counter()
        held = build(f"{lake}/events", args.events, args.files, args.days, args.per_file, picks)
        start = paths(DeltaTable(f"{lake}/events"))
        files, total = len(start), sum(start.values())
        print(f"lake: {args.events:,} events in {files} files, {total / 1e6:,.1f} MB, built in "
              f"{time.perf_counter() - began:.0f} s; each url's {args.per_file} rows in each of "
              f"{args.holding} files (url 0's: files {picks[0]})", flush=True)  # fmt: skip
        raw, _ = holding_bytes(Path(lake), erased_url(0))
        print(f"before: {raw} files hold url 0's bytes as stored (the check below can see them)")
        full, written_files, written = full_rewrite(f"{lake}/events", f"{work}/copy", erased_url(0))
        shutil.rmtree(f"{work}/copy")
        print(f"full rewrite without url 0: {full:.1f} s, {files} files read ({total / 1e6:,.1f}"
              f" MB), {written_files} written ({written / 1e6:,.1f} MB)", flush=True)  # fmt: skip
        runs = [erase_one(lake, k, held[k]) for k in range(args.urls)]
        vacuumed = lake_erase.vacuum(lake, 0)
        left = [holding_bytes(Path(lake), erased_url(k)) for k in range(args.urls)]
        print(f"after vacuum ({vacuumed} files removed): files holding a url's bytes "
              f"{sum(r for r, _ in left)}, rows with it {sum(n for _, n in left)}")  # fmt: skip
    mid = {name: statistics.median(r[name] for r in runs) for name in runs[0]}
    print(f"\n{'':14}{'time, s':>18}{'files rewritten':>17}{'MB rewritten':>14}"
          f"{'MB written':>12}")  # fmt: skip
    print(
        f"{'full rewrite':14}{full:>18.1f}{files:>17}{total / 1e6:>14,.1f}{written / 1e6:>12,.1f}"
    )
    print(f"{'lake erase':14}{spread([r['s'] for r in runs], '{:.2f}'):>18}{mid['files']:>17.0f}"
          f"{mid['bytes'] / 1e6:>14,.1f}{mid['written'] / 1e6:>12,.1f}")  # fmt: skip
    print(f"{'full / erase':14}{full / mid['s']:>17.0f}x{files / mid['files']:>16.0f}x"
          f"{total / mid['bytes']:>13.0f}x{written / mid['written']:>11.0f}x")  # fmt: skip
    print(f"(erase: median (min-max) of {args.urls} urls, its query alone "
          f"{spread([r['query_s'] for r in runs], '{:.2f}')} s, its delete commit "
          f"{spread([r['delete_s'] for r in runs], '{:.2f}')} s; the log removed exactly the "
          f"holding files every time: {all(r['exact'] for r in runs)})")  # fmt: skip


if __name__ == "__main__":
    main()
