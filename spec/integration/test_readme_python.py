"""The Python blocks of docs/python.md ("From Python"), run as written, in order, against
real `busbar web` and `busbar worker` processes: only the receiver's port is swapped for a
free one, and `app.run(...)` for a server in a thread (it would block the test).

On one Redis (`layout_free`): the page's blocks speak HTTP, the same to either
layout (the bus's side on a Redis Cluster: test_delivery.py, test_matrix.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook

from spec.clients.servers import asgi_serving, recording, wsgi_serving
from spec.conftest import ROOT_KEY
from spec.integration.bus import bus
from spec.integration.processes import free_port, wait_until

pytestmark = pytest.mark.layout_free

RUN_LINE = "app.run(port=8000)  # in the subscriber's own process"


def python_blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)


@pytest.mark.slow
def test_the_from_python_blocks_run_as_written(
    redis_url: str, redis_client, tmp_path: Path, project_root: Path, monkeypatch
):
    blocks = python_blocks((project_root / "docs" / "python.md").read_text())
    assert len(blocks) == 7, "connect, subscribe, flask, asgi, publish, verify, rotate"
    connect, subscribe, flask, asgi, publish, verify, rotate = blocks
    assert RUN_LINE in flask and "127.0.0.1:8000/busbar" in subscribe
    port = free_port()
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "root-key").write_text(ROOT_KEY + "\n")
    monkeypatch.chdir(tmp_path)
    wire: list = []
    with bus(redis_url, tmp_path) as b:
        monkeypatch.setenv("BUSBAR_URL", b.base)
        space: dict[str, Any] = {"__name__": "python_page"}
        exec(connect, space)
        exec(subscribe.replace("127.0.0.1:8000", f"127.0.0.1:{port}"), space)
        exec(flask.replace(RUN_LINE, ""), space)
        exec(asgi, space)
        received = space["received"]
        with wsgi_serving(recording(space["app"], wire), port):
            exec(publish, space)
            wait_until(lambda: len(received) == 3, what="the three published events")
        assert [(kind, url) for kind, url, _ in received] == [
            ("create", "https://shop.example/orders/1"),
            ("update", "https://shop.example/orders/1"),
            ("update", "https://shop.example/orders/2"),
        ]
        assert all(event_id.startswith("evt_") for _, _, event_id in received)
        exec(verify, space)
        for body, headers in wire:  # the page's verify, and the reference library's own
            assert space["verified"](body, headers) == Webhook(space["secret"]).verify(
                body, headers
            )
        assert wire

        # the Starlette app, under uvicorn
        received.clear()
        with asgi_serving(space["asgi_app"]) as base:
            space["billing"].subscribe(base + "/busbar", ["orders"], event_ids=True)
            space["shop"].publish("orders", space["NewEvent"]("update", "https://s.example/9"))
            wait_until(lambda: len(received) == 1, what="the event through Starlette")
        assert received[0][:2] == ("update", "https://s.example/9")

        old = space["secret"]
        exec(rotate, space)
        new = space["billing"].secret().secret  # root rotated it once more, by name
        assert new not in (old, space["rotated"].secret)
