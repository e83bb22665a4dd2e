"""The shared domain: models, Lua scripts, codec, services, the delivery engine, and
the Flask app in app/web/ (nothing outside it imports Flask). Nothing heavy is imported
with the package.

Modules (docs/layout.md is the whole map; spec/test_map.py keeps both true):

    admin.py            `busbar subscriber pause|resume NAME`, without HTTP
    clients_admin.py    `busbar clients shared|rename`: names clients share, mended
    clock.py            the wall clock in milliseconds, and ISO times as the API reads them
    codec.py            msgpack of events, route tables, jobs, dead letters: the only place
    erase_admin.py      `busbar erase`: an erasure asked for, listed, waited for
    errors.py           one base class; RetryableError carries its delay
    framing.py          HTTP/1.1 framing (RFC 9112, strictly) both readers share
    limits.py           the open-files limit a worker or web process raises at start
    migrate_admin.py    `busbar migrate`: the store's layout brought to this release's
    otel.py             the OpenTelemetry SDK behind tracing.py, imported only when on
    operator_session.py what the operator commands (`busbar subscriber`, `erase`, ...) open first
    redis_client.py     the one client factory (hiredis; redis-py's blind retries off)
    release.py          this release's version and Redis layout number: one source each
    secrets_admin.py    `busbar secrets reseal`: secrets sealed again under a new key
    tracing.py          what web and worker ask of tracing; a no-op when it is off
    turn.py             what long work calls between its pieces (app/web/turns.py)
    unblock.py          a stopping worker's blocked takes, ended at once (CLIENT UNBLOCK)
    delivery/           the delivery room: from a job in Redis to the answer recorded there
    lua/                one multi-key change per *.lua file, KEYS/ARGV header (LuaScript)
    models/             what is stored, and the rules of what may be
    services/           what spans several models
    web/                the Flask app and the gunicorn server around it
"""
