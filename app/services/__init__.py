"""What spans several models: publishing, shedding, counters and metrics, signatures,
replay's Redis side.

Modules (docs/layout.md is the whole map; spec/test_map.py keeps both true):

    counters.py         the counters, added up over the catalog and the shards
    erasure.py          an erasure carried out: passes of bounded steps over every shard
    failure.py          why a callback gave no answer, in an operator's words
    fair_share.py       Autodrop's fair shares
    ingest.py           publishing, in bounded steps
    metrics.py          GET /metrics' families
    operations.py       `busbar_operations`, the bus's own topic
    origin_limits.py    the workers' limits per callback origin, for /metrics and /origins
    push_tokens.py      the worker's JWT per push: minted, cached, signed ES256
    refused_callbacks.py  subscriptions the callback policy now refuses
    replay.py           the Redis side of a lake replay
    retention.py        payload retention carried out, by Expire
    samples.py          per-minute samples for the console's charts
    schemas.py          a topic's event schemas: set, deprecated, removed, listed
    sealed_headers.py   headers' secrets sealed in, opened by the worker, resealed
    shedding.py         Expire and Autodrop
    signing.py          Standard Webhooks signatures
    subscriber_metrics.py  per-subscriber samples for /metrics
    topic_rules.py      a topic's content filters and event schemas, checked at publish
    workers.py          worker processes as an operator sees them
"""
