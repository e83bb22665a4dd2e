"""The `busbar` PySpark data source: the delivery log streams as a table of events, or
(option `table` = attempts) the attempt streams as a table of attempts (spark/tables.py).

    spark.dataSource.register(BusbarDataSource)
    spark.readStream.format("busbar").option("redis.url", url).load()   # streaming
    spark.read.format("busbar").option("redis.url", url).load()         # batch

Options: redis.url (required), table (events | attempts), keyPrefix (busbar:),
partitions (4), startingOffsets
(earliest | latest | JSON {"<partition>": "<entry id>"}, missing partitions earliest),
endingOffsets (batch only: latest | JSON), failOnDataLoss (false),
maxBatchesPerTrigger (log entries per micro-batch; availableNow honours it too).

Spark pickles this class by reference, so it must be imported from the installed
`spark` package on the driver and on every executor, never defined in a script.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from spark import offsets, ranges
from spark.options import SourceOptions
from spark.stream import BusbarStreamReader

NAME = "busbar"


class BusbarDataSource(DataSource):
    """Options are parsed here, at `.load()`, so a mistake fails before any job runs."""

    def __init__(self, options: MutableMapping[str, str]) -> None:
        super().__init__(options)
        self.parsed = SourceOptions.parse(self.options)

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return self.parsed.lake_table.schema

    # PySpark passes the schema by name; it is the table's (schema() above)
    def reader(self, schema: StructType) -> DataSourceReader:  # noqa: ARG002
        return BusbarBatchReader(self.parsed)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: ARG002
        return BusbarStreamReader(self.parsed)


class BusbarBatchReader(DataSourceReader):
    """A bounded read from startingOffsets to endingOffsets, resolved when planned."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        with self.options.client() as client:
            ranges.warn_unread_streams(client, self.options)
            infos = offsets.stream_infos(client, self.options.keys())
            start = ranges.resolve(client, self.options, self.options.starting, infos)
            end = ranges.resolve(client, self.options, self.options.ending, infos)
        return list(ranges.plan(self.options, start, end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ranges.StreamRange):  # Spark's placeholder: no ranges
            return iter(())
        return ranges.read_range(self.options, partition)
