"""The delivery room: everything between a job waiting in Redis and the subscriber's
answer recorded there, in one package.

    engine.py    the worker's delivery engine: an asyncio event loop in a thread of its
                 own, carrying BUSBAR_DELIVERY_CONCURRENCY slots; starts and stops them
    slots.py     one slot's loop: take a job into the slot's own pending list, deliver,
                 settle; recover its own list after an error
    doorbell.py  how idle slots share the waiting: one watches each shard in Redis
                 (BLMOVE), the rest wait in the process for nothing
    steps.py     a delivery's steps on the asyncio clients: take, begin, send, ack/fail
    calls.py     the typed builders of the delivery scripts' KEYS and ARGV (one per
                 script, checked against the script's header by a test)
    replies.py   what the scripts answer, read once for both clients
    callback.py  the callback HTTP client: the address check, no proxy, no redirect,
                 the CA bundle, the total deadline, a bounded answer
    origins.py   its connections: resolved and checked, connected, kept alive
    gate.py      what one origin is asked to take: connections open and opening, bounded
    http1.py     one HTTP/1.1 exchange on a connection
    answer.py    the answer, framed (RFC 9112) and bounded

The state machine itself is Lua (app/lua/lib/jobs.lua, lib/delivery.lua): the worker
asks, Redis decides, and a slot that no longer holds its job changes nothing. A waiting
delivery holds a socket and a small coroutine, not a thread: one process carries
thousands in flight, and a subscriber that never answers costs one slot until
BUSBAR_TIMEOUT, not the bus.
"""
