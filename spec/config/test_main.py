"""`busbar config` as a user runs it: the values in effect, secrets masked, bad values
named in one line with exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from config import devstate
from config.origins import record as origins_record
from spec.integration.processes import busbar_env

PASSWORD = "s3cret-redis-pw"
ROOT_KEY = "root-key-never-shown-42"


def busbar_config(cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "busbar", "config"],
        env=busbar_env(**env), cwd=cwd, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def values(output: str) -> dict[str, str]:
    return {
        line.split("=", 1)[0]: line.split("=", 1)[1].split("  #")[0]
        for line in output.splitlines()
        if not line.startswith("#")
    }


def origins(output: str) -> dict[str, str]:
    """Each variable's origin: the last parenthesis of its line, up to `;`."""
    return {
        line.split("=", 1)[0]: line.rsplit(" (", 1)[-1].split(";")[0].rstrip(")")
        for line in output.splitlines()
        if not line.startswith("#")
    }


def test_shows_the_values_in_effect_with_secrets_masked(tmp_path: Path):
    done = busbar_config(
        tmp_path,
        PORT="8080",
        BUSBAR_ROOT_KEY=ROOT_KEY,
        BUSBAR_REDIS_URL=f"redis://app:{PASSWORD}@redis.internal:6380/2",
        BUSBAR_ALLOW_HTTP="yes",
    )
    assert done.returncode == 0, done.stderr
    shown = values(done.stdout)
    assert shown["PORT"] == "8080"
    assert shown["BUSBAR_DELIVERY_CONCURRENCY"] == "5000"  # unset: the default
    assert shown["BUSBAR_ALLOW_HTTP"] == "true"
    assert shown["BUSBAR_REDIS_URL"] == "redis://app:****@redis.internal:6380/2"
    assert shown["BUSBAR_ROOT_KEY"] == "****"
    assert "PORT=8080  # HTTP port of `busbar web` (environment; default 17890)" in done.stdout
    assert origins(done.stdout)["BUSBAR_DELIVERY_CONCURRENCY"] == "default"
    assert PASSWORD not in done.stdout + done.stderr and ROOT_KEY not in done.stdout


def test_unset_redis_url_shows_the_default_or_the_running_dev(tmp_path: Path):
    assert values(busbar_config(tmp_path).stdout)["BUSBAR_REDIS_URL"] == (
        "redis://127.0.0.1:6379/0"
    )
    var = tmp_path / "var"
    lock = devstate.claim(var)  # this test plays the running `busbar dev`
    assert lock is not None
    with lock:
        devstate.publish(
            var, {"pid": 1, "api": "http://x", "redis_url": "redis://127.0.0.1:4242/0"}
        )
        output = busbar_config(tmp_path).stdout
        assert values(output)["BUSBAR_REDIS_URL"] == "redis://127.0.0.1:4242/0"
        assert origins(output)["BUSBAR_REDIS_URL"] == "busbar dev"  # a dev that kept no record
    # the lock is gone with its dev: the file left behind is not believed
    assert values(busbar_config(tmp_path).stdout)["BUSBAR_REDIS_URL"] == (
        "redis://127.0.0.1:6379/0"
    )


def test_bad_values_are_one_line_naming_each_variable_without_the_password(tmp_path: Path):
    done = busbar_config(
        tmp_path, PORT="eighty", BUSBAR_REDIS_URL=f"http://:{PASSWORD}@redis.internal"
    )
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("busbar config: invalid configuration: ")
    assert "BUSBAR_REDIS_URL: expected a redis://" in line and "PORT: expected an integer" in line
    assert PASSWORD not in line and "http://****@redis.internal" in line


def test_beside_a_dev_shows_what_its_web_and_worker_read_unless_redis_is_named(tmp_path: Path):
    """The values dev wrote down for its web and worker, with their origins; a value this
    shell sets otherwise is named too. BUSBAR_REDIS_URL set here means another bus."""
    outer = {"BUSBAR_LOG_LEVEL": "warning", "BUSBAR_ALLOW_HTTP": "no"}
    given = {  # what a dev started from `outer` gives its web and worker
        **outer,
        "BUSBAR_REDIS_URL": f"redis://app:{PASSWORD}@127.0.0.1:4242/0",
        "BUSBAR_ROOT_KEY": ROOT_KEY,
        "BUSBAR_PUBLIC_URL": "http://127.0.0.1:4243",
        "BUSBAR_ALLOW_HTTP": "0",
    }
    record = origins_record(given, outer)
    assert record is not None and PASSWORD not in str(record) and ROOT_KEY not in str(record)
    var = tmp_path / "var"
    lock = devstate.claim(var)  # this test plays the running `busbar dev`
    assert lock is not None
    with lock:
        state = {"pid": 1, "api": "http://127.0.0.1:4243", "redis_url": given["BUSBAR_REDIS_URL"]}
        devstate.publish(var, {**state, "settings": record})
        done = busbar_config(tmp_path, BUSBAR_LOG_LEVEL="debug")
        assert done.returncode == 0, done.stderr
        shown, where = values(done.stdout), origins(done.stdout)
        assert done.stdout.startswith("# the bus of the busbar dev running here (pid 1, ")
        assert (shown["BUSBAR_PUBLIC_URL"], where["BUSBAR_PUBLIC_URL"]) == (
            "http://127.0.0.1:4243",
            "busbar dev",
        )
        assert (shown["BUSBAR_ALLOW_HTTP"], where["BUSBAR_ALLOW_HTTP"]) == (
            "false",
            "busbar dev's environment",
        )
        assert shown["BUSBAR_REDIS_URL"] == "redis://app:****@127.0.0.1:4242/0"
        assert (shown["BUSBAR_ROOT_KEY"], where["BUSBAR_ROOT_KEY"]) == ("****", "busbar dev")
        assert (shown["BUSBAR_TIMEOUT"], where["BUSBAR_TIMEOUT"]) == ("20", "default")
        (level,) = [x for x in done.stdout.splitlines() if x.startswith("BUSBAR_LOG_LEVEL=")]
        assert level.startswith("BUSBAR_LOG_LEVEL=warning  #")
        assert "this shell has debug, which a command started here would use" in level
        assert PASSWORD not in done.stdout and ROOT_KEY not in done.stdout

        elsewhere = busbar_config(tmp_path, BUSBAR_REDIS_URL="redis://10.0.0.5:6379/0")
        assert not elsewhere.stdout.startswith("#")
        assert origins(elsewhere.stdout)["BUSBAR_PUBLIC_URL"] == "default"
        assert values(elsewhere.stdout)["BUSBAR_REDIS_URL"] == "redis://10.0.0.5:6379/0"
