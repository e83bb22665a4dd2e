"""Options of the `busbar` data source, parsed once when the source is created.

Spark hands options over as a case-insensitive dict; `dict(options)` would lowercase the
keys (docs/internals.md), so each option is looked up on the object as the user spelled it.
Parsing at creation makes a typo fail at `.load()`, not minutes later in a worker.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import redis

from app.models.keys import Keys
from spark.connect import open_client
from spark.errors import OptionError
from spark.offsets import parse_id
from spark.tables import TABLES, Table

# "earliest", "latest", or partition -> entry id (or "earliest"/"latest" for that one)
Spec = str | dict[int, str]
NAMED = ("earliest", "latest")


def _integer(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = options.get(name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"option {name} must be an integer, got {raw!r}") from None
    if value < 1:
        raise OptionError(f"option {name} must be at least 1, got {value}")
    return value


def _boolean(options: Mapping[str, str], name: str) -> bool:
    raw = str(options.get(name) or "false").strip().lower()
    if raw not in ("true", "false"):
        raise OptionError(f"option {name} must be true or false, got {raw!r}")
    return raw == "true"


def _spec(options: Mapping[str, str], name: str, default: str, partitions: int) -> Spec:
    """`earliest`/`latest` or JSON `{"<partition>": "<id>"}`; ids are checked here."""
    raw = str(options.get(name) or default).strip()
    if raw.lower() in NAMED:
        return raw.lower()
    try:
        given = json.loads(raw)
    except ValueError:
        raise OptionError(f"option {name} must be earliest, latest or JSON, got {raw!r}") from None
    if not isinstance(given, dict):
        raise OptionError(f'option {name} JSON must be an object like {{"0": "<id>"}}')
    spec: dict[int, str] = {}
    for key, value in given.items():
        try:
            partition = int(key)
        except ValueError:
            raise OptionError(f"option {name}: {key!r} is not a partition number") from None
        if not 0 <= partition < partitions:
            raise OptionError(f"option {name}: partition {partition} not in 0..{partitions - 1}")
        text = str(value).strip()
        if text.lower() not in NAMED:
            parse_id(text)
        spec[partition] = text.lower() if text.lower() in NAMED else text
    return spec


@dataclass(frozen=True)
class SourceOptions:
    """Everything a reader needs; plain values only, because readers are pickled."""

    redis_url: str
    cluster: bool = False
    key_prefix: str = "busbar:"
    partitions: int = 4
    starting: Spec = "earliest"
    ending: Spec = "latest"
    fail_on_data_loss: bool = False
    max_per_trigger: int | None = None
    table: str = "events"  # spark/tables.py: which stream per shard, which rows

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        url = str(options.get("redis.url") or "").strip()
        if not url:
            raise OptionError("option redis.url is required (e.g. redis://127.0.0.1:6379/0)")
        partitions = _integer(options, "partitions", 4) or 4
        table = str(options.get("table") or "events").strip().lower()
        if table not in TABLES:
            raise OptionError(f"option table must be one of {', '.join(TABLES)}, got {table!r}")
        return cls(
            redis_url=url,
            cluster=_boolean(options, "redis.cluster"),
            key_prefix=str(options.get("keyPrefix") or "busbar:"),
            partitions=partitions,
            starting=_spec(options, "startingOffsets", "earliest", partitions),
            ending=_spec(options, "endingOffsets", "latest", partitions),
            fail_on_data_loss=_boolean(options, "failOnDataLoss"),
            max_per_trigger=_integer(options, "maxBatchesPerTrigger", None),
            table=table,
        )

    @property
    def lake_table(self) -> Table:
        return TABLES[self.table]

    @property
    def label(self) -> str:
        """How messages name the streams read: `busbar delivery log`, ..."""
        return self.lake_table.label

    def key(self, partition: int) -> str:
        return self.lake_table.stream(Keys(self.key_prefix, self.partitions).shard(partition))

    def keys(self) -> list[str]:
        return [self.key(p) for p in range(self.partitions)]

    def client(self) -> redis.Redis:
        """A fresh connection: never kept on a reader (locks cannot be pickled)."""
        return open_client(self.redis_url, self.cluster)
