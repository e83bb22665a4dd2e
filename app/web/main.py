"""`busbar web`: gunicorn serving the Flask app on $PORT (app/web/server.py)."""

from __future__ import annotations

import sys

from config.settings import Settings
from config.startup import start

NO_ROOT_KEY = (
    "busbar web: BUSBAR_ROOT_KEY is not set. Set it to a secret of 8+ printable "
    "characters (it is the root API key), or use `busbar dev`, which makes one."
)


def check_store_if_reachable(settings: Settings) -> None:
    """A layout this release cannot read, or a different BUSBAR_SHARDS, is refused at
    start (ConfigError: exit 2); Redis being down is not, the web answers 503 until it
    is back."""
    import redis

    from app.models.keys import keys_for
    from app.models.meta import check_store
    from app.redis_client import connect

    client = connect(settings)
    try:
        check_store(client, keys_for(settings))
    except redis.RedisError as exc:
        print(f"busbar web: could not check the store against Redis: {exc}", file=sys.stderr)
    finally:
        client.close()


def main(argv: list[str]) -> int:
    settings = start("web", argv, "serve the HTTP API with gunicorn on $PORT")
    if not settings.root_key:
        print(NO_ROOT_KEY, file=sys.stderr)
        return 2
    if settings.web_worker_class == "gevent":
        # before ssl, sockets and redis are imported (gunicorn's worker patches only after
        # the fork, too late for modules this process has loaded): the master and its
        # workers then share one patched world, as gevent asks
        from gevent import monkey

        monkey.patch_all()
    from app.web.server import serve  # gunicorn and Flask load only for this command

    check_store_if_reachable(settings)
    serve(settings)
    return 0
