"""gunicorn's options for `busbar web`, derived from Settings.

Connections are kept alive (publishers that post many events rely on it) for
BUSBAR_HEADER_TIMEOUT_S; the app is built in each worker (no preload) so no Redis socket
crosses a fork. The gevent worker class is app/web/worker.py's, which carries the
header and body deadlines (app/web/server.py sets it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from config.settings import Settings


def pre_request_for(max_bytes: int) -> Callable[[Any, Any], None]:
    """gunicorn's pre_request hook, run by the gthread class between a request's headers
    and the app:

    - gunicorn answers `Expect: 100-continue` with `100 Continue` before the app runs, so
      a client declaring a body over BUSBAR_MAX_BODY_BYTES would send it all before
      hearing 413: the 100 is withheld for such a request, and the app's 413
      (app/web/body.py) is the first answer;
    - a request with Transfer-Encoding is refused by the app unread (its chunk lines
      are not framed strictly under this class: app/web/body.py), so its connection is
      marked to close after that answer: gunicorn ignores the app's `Connection: close`,
      and the unread body must never be taken for the next request."""

    def pre_request(_worker: Any, req: Any) -> None:
        for name, value in req.headers:
            if name == "TRANSFER-ENCODING":
                req.force_close()
            elif (
                name == "CONTENT-LENGTH"
                and value.isascii()
                and value.isdigit()
                and int(value) > max_bytes
            ):
                req._expected_100_continue = False

    return pre_request


def options(settings: Settings) -> dict[str, Any]:
    return {
        "pre_request": pre_request_for(settings.max_body_bytes),
        "bind": f"{settings.host or '0.0.0.0'}:{settings.port}",
        "workers": settings.web_workers,
        "worker_class": settings.web_worker_class,
        "threads": settings.web_threads,
        "worker_connections": settings.web_connections,
        "keepalive": settings.header_timeout_s,
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
