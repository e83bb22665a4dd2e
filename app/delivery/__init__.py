"""The delivery room: everything between a job waiting in Redis and the subscriber's
answer recorded there, in one package. Modules (docs/layout.md is the whole map;
spec/test_map.py keeps both true):

    answer.py           a callback's answer, framed strictly and bounded
    backpressure.py     429/503 with Retry-After: a wait, not a failure
    broker_messages.py  a batch as a broker's messages: one per event, its id to dedupe
    broker_pool.py      connections to brokers: one per broker and credentials, bounded
    callback.py         the engine's callback client and its safeguards
    calls.py            each delivery script's KEYS/ARGV, built in one place
    credentials.py      what a request carries to prove itself: own headers, certificate,
                        a push or OAuth2 token (renewed after a 401)
    cpu_budget.py       the slow lane's share of a core: CPU time filled at a rate
    destinations.py     a batch to its broker destination in place of a callback
    dialer.py           reaching an origin: resolved, its addresses checked, connected
    doorbell.py         how idle slots wait without asking Redis in turn
    engine.py           the worker's event loop and its slots
    flight.py           the batch in flight, or what the job did
    gate.py             bounds per origin: connections open and being opened
    gates.py            every origin's gate, the limits learnt for idle ones, the report
    http1.py            one HTTP/1.1 exchange on an asyncio protocol
    identities.py       TLS client certificates as contexts, loaded from memory
    kept.py             kept-alive connections idle between requests, closed first when short
    loop_lag.py         whether the worker's own event loop was late
    nats_publisher.py   NATS JetStream destinations: a batch published, each PubAck awaited
    origin_limit.py     each origin's connection limit, adapted to how it copes
    origins.py          connections to origins: kept alive, reused, bounded, waited for
    parking.py          a delivery waiting at a busy origin without its slot
    plan.py             what the steps decide around each script (AsyncDelivery's base)
    rabbitmq_publisher.py  RabbitMQ destinations: confirmed, mandatory, in order
    replies.py          a reply joined with its caller's context: flight, outcome
    request.py          one attempt's POST and what its answer means (an AttemptResult)
    room.py             what the slots of one engine share
    shaper.py           the processes that run transforms; the slow lane
    shaping.py          a batch's events through their routes' transforms
    share.py            the failing subscribers' bounded share of the engine
    slots.py            one slot: take, deliver, settle
    sqs_publisher.py    Amazon SQS destinations: ten to a call, in order, every entry
    steps.py            take, begin, send, ack or fail: a delivery's steps, in order
    tags.py             the delivery scripts' replies as types: tags, kinds, shapes
    token_fetch.py      one request to an OAuth2 token endpoint, read strictly
    token_source.py     OAuth2 access tokens for deliveries: one fetch for the bus
    trial.py            one request to a callback outside the queue (its test call)

The state machine itself is Lua (app/lua/lib/jobs.lua, lib/delivery.lua): the worker
asks, Redis decides, and a slot that no longer holds its job changes nothing. A waiting
delivery holds a socket and a small coroutine, not a thread: one process carries
thousands in flight, and a subscriber that never answers costs one slot until
BUSBAR_TIMEOUT, not the bus.
"""
