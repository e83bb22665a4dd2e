"""`busbar dev` and what it stands on: the supervisor of web and worker, and the launcher
of a Redis-compatible server from a pip wheel (also used by the tests and benchmarks)."""
