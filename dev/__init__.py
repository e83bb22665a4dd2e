"""`busbar dev` and what it stands on: the supervisor of web and worker, and the launcher
of a Redis-compatible server from a pip wheel (also used by the tests and benchmarks).

Modules (docs/layout.md is the whole map; spec/test_map.py keeps both true):

    cluster.py          a local Redis Cluster from the embedded server
    main.py             `busbar dev`
    redis_server.py     a real Redis-compatible server from a pip-installed binary
    supervisor.py       web and worker supervised on one machine
"""
