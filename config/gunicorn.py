"""gunicorn's options for `busbar web`, derived from Settings.

gthread workers keep HTTP/1.1 connections alive, which publishers that post many events
rely on; the app is built in each worker (no preload) so no Redis socket crosses a fork.
"""

from __future__ import annotations

from typing import Any

from config.settings import Settings


def options(settings: Settings) -> dict[str, Any]:
    return {
        "bind": f"{settings.host or '0.0.0.0'}:{settings.port}",
        "workers": settings.web_workers,
        "worker_class": "gthread",
        "threads": settings.web_threads,
        "keepalive": 30,
        "timeout": 60,
        "graceful_timeout": 15,
        "preload_app": False,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": settings.log_level,
        "proc_name": "busbar-web",
        "worker_tmp_dir": "/dev/shm",
        "control_socket_disable": True,
    }
