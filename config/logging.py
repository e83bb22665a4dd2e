"""Logging: one line per event, human text by default, JSON with BUSBAR_LOG_FORMAT=json."""

from __future__ import annotations

import json
import logging
import sys
import time

from config.settings import Settings

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
# broker clients that log a lost connection with its traceback (aiormq at warning, on
# every RabbitMQ restart): busbar logs the failed attempt with its reason already
# (app/delivery/destinations.py), so theirs are kept to errors
QUIETED = ("aiormq.connection", "aiormq.channel")


class JsonFormatter(logging.Formatter):
    """Each record as one JSON object; `extra=` fields become keys of their own."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def setup(settings: Settings, process: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(
            logging.Formatter(
                f"%(asctime)s {process}[%(process)d] %(levelname)s %(name)s: %(message)s"
            )
        )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    for name in QUIETED:
        logging.getLogger(name).setLevel(logging.ERROR)
