"""`busbar config` beside a real `busbar dev`: it shows the settings dev's web and worker
run with (http allowed, dev's own address as BUSBAR_PUBLIC_URL), where each came from,
and no secret; once dev stops, this shell's settings again."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from spec.config.test_main import origins, values
from spec.integration.processes import busbar_env, free_port, running, wait_until


def busbar_config(cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "busbar", "config"],
        env=busbar_env(**env), cwd=cwd, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_config_beside_dev_shows_devs_settings_and_where_each_came_from(tmp_path: Path):
    port = free_port()
    log = tmp_path / "dev.log"
    env = busbar_env(PORT=str(port), BUSBAR_LOG_LEVEL="warning")
    with running(["dev"], env, cwd=tmp_path, log=log) as dev:
        wait_until(lambda: "busbar dev is running" in log.read_text(), 60, "busbar dev to start")
        root_key = (tmp_path / "var" / "root-key").read_text().strip()
        done = busbar_config(tmp_path, BUSBAR_LOG_LEVEL="debug")
        assert done.returncode == 0, done.stderr
        shown, where = values(done.stdout), origins(done.stdout)
        assert (shown["BUSBAR_ALLOW_HTTP"], where["BUSBAR_ALLOW_HTTP"]) == ("true", "busbar dev")
        assert (shown["BUSBAR_PUBLIC_URL"], where["BUSBAR_PUBLIC_URL"]) == (
            f"http://127.0.0.1:{port}",
            "busbar dev",
        )
        assert where["BUSBAR_CALLBACK_ALLOW"] == "busbar dev"
        assert where["BUSBAR_REDIS_URL"] == "busbar dev"
        assert f"Redis     {shown['BUSBAR_REDIS_URL']} " in log.read_text()
        assert (shown["PORT"], where["PORT"]) == (str(port), "busbar dev's environment")
        assert (shown["BUSBAR_ROOT_KEY"], where["BUSBAR_ROOT_KEY"]) == (
            "****",
            "busbar dev, var/root-key",
        )
        assert (shown["BUSBAR_TIMEOUT"], where["BUSBAR_TIMEOUT"]) == ("20", "default")
        (level,) = [x for x in done.stdout.splitlines() if x.startswith("BUSBAR_LOG_LEVEL=")]
        assert level.startswith("BUSBAR_LOG_LEVEL=warning  #")
        assert "(busbar dev's environment; default info; this shell has debug," in level
        assert root_key not in done.stdout + done.stderr
        assert root_key not in (tmp_path / "var" / "dev.json").read_text()
        dev.send_signal(signal.SIGTERM)
        assert dev.wait(60) == 0

    after = busbar_config(tmp_path)
    assert not after.stdout.startswith("#")
    assert (
        values(after.stdout)["BUSBAR_ALLOW_HTTP"],
        origins(after.stdout)["BUSBAR_ALLOW_HTTP"],
    ) == (
        "false",
        "default",
    )
