"""The settings of the test session's JVMs from the moment one is started: those of
spec/spark/conf, and a class archive made once (the JDK's class data sharing:
`-XX:ArchiveClassesAtExit` on one run, `-XX:SharedArchiveFile` on the others).

A test's Spark job is small: most of its JVM's start is loading and verifying Spark's
own classes, the same ones every time. Mapped from an archive, a session's start and
its first query took 5.1 s against 10.4 s here. The archive is made by one
`busbar spark ingest --available-now` of a few log entries (a Redis of its own), so
it holds what an ingest loads (the streaming query, the Python data source, Arrow);
anything else loads as before. A JVM whose class path or version differs from the run
that made it (another java, as spec/spark/test_java.py uses) ignores it, silently
(`-Xlog:cds*=off`): the archive only ever saves time. If it cannot be made, the
settings are spec/spark/conf's as they are.

The JDK maps an archive only where no directory on the class path holds a file, and
Spark's launcher puts SPARK_CONF_DIR on it: so SPARK_CONF_DIR is an empty directory
here, and the settings file is given to every PySpark driver as `--properties-file`
(PYSPARK_SUBMIT_ARGS, which PySpark adds to its spark-submit).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import redis

from dev import redis_server
from spec.integration.processes import busbar_env
from spec.spark.logdata import LogWriter

SOURCE = Path(__file__).resolve().parent / "conf" / "spark-defaults.conf"
DRIVER = "spark.driver.extraJavaOptions"
QUIET = "-Xlog:cds*=off"  # a JVM that cannot use the archive says nothing of it
MADE_IN_S = 300


def environment(base: Path) -> dict[str, str]:
    """SPARK_CONF_DIR and PYSPARK_SUBMIT_ARGS for the JVMs started from now on, their
    files under `base`, the archive made first."""
    empty, settings, archive = base / "conf", base / "spark-defaults.conf", base / "spark.jsa"
    empty.mkdir(parents=True, exist_ok=True)
    env = {"SPARK_CONF_DIR": str(empty),
           "PYSPARK_SUBMIT_ARGS": f"--properties-file {settings} pyspark-shell"}  # fmt: skip
    write(settings, f"-XX:ArchiveClassesAtExit={archive} {QUIET}")
    made = ingest(env, base) and archive.exists()
    write(settings, f"-XX:SharedArchiveFile={archive} {QUIET}" if made else "")
    return env


def write(settings: Path, options: str) -> None:
    lines = []
    for line in SOURCE.read_text().splitlines():
        if line.startswith(DRIVER) and options:
            line = f"{line} {options}"
        lines.append(line)
    settings.write_text("\n".join(lines) + "\n")


def ingest(spark_env: dict[str, str], base: Path) -> bool:
    """One `busbar spark ingest` of a few entries, in `spark_env`."""
    server = redis_server.start(base / "redis", persistent=False)
    try:
        client = redis.Redis.from_url(server.url)
        log = LogWriter(client)
        for partition in range(4):
            log.batch(partition, events=3)
        client.close()
        env = busbar_env(BUSBAR_REDIS_URL=server.url, **spark_env)
        command = [sys.executable, "-m", "busbar", "spark", "ingest", "--available-now",
                   "--output", str(base / "lake"), "--checkpoint", str(base / "checkpoint"),
                   "--master", "local[2]"]  # fmt: skip
        try:
            done = subprocess.run(command, env=env, capture_output=True, timeout=MADE_IN_S)
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0
    finally:
        server.stop()
