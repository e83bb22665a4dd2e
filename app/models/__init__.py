"""What is stored in Redis and the rules of what may be: every key in keys.py, whose
docstring is the data layout.

Modules (docs/layout.md is the whole map; spec/test_map.py keeps both true):

    addresses.py        what address a callback's host denotes, whatever its spelling
    attempt_result.py   what one attempt came to, as a value: its code, wait, class and text
    attempts.py         the attempt log, read
    callback_auth.py    how a callback authenticates the bus: basic, a JWT per push, OAuth2
    callback_headers.py a subscription's own headers: what may be sent, listed
    callback_policy.py  which addresses busbar will not call back, and who may open which
    callback_url.py     a callback URL (and an OAuth2 token URL) as a subscription takes it
    client_names.py     names clients from before share: listed, one renamed
    client_cert.py      a subscription's TLS client certificate: checked, its key sealed
    deadletters.py      dead letters: kept, listed, replayed, dropped
    delivered.py        a subscriber's last delivered event, from the delivery log
    destination.py      a subscription's broker destination: checked, its secrets sealed
    destination_types.py  the brokers a destination may name, and their fields
    erasure_calls.py    the erasure scripts' calls and replies, typed
    erasures.py         erasures: the request, who may, the record and its receipt
    event.py            published events: validated, then encoded once
    event_ids.py        the `id` a subscription with `event_ids` receives
    fields.py           field rules the validators and OpenAPI share
    filters.py          content filters: parsed once, bounded, matched by closures
    job_calls.py        the job and worker liveness scripts' calls and replies, typed
    lakes.py            the lakes ingests write, as erasures wait for them
    keys.py             every Redis key; its docstring is the data layout
    layout.py           the store's layout number: stamped, checked, migrated
    meta.py             what a bus is fixed to once used: its shards, its layout
    oauth2.py           OAuth2 client credentials: checked, the secret sealed, listed
    oauth_tokens.py     the bus-wide cache of OAuth2 access tokens: its calls, typed
    partitions.py       a subscriber's partitions (`concurrency` > 1)
    pausing.py          pausing and resuming a subscriber
    push_keys.py        the key pairs that sign a JWT per push, and their JWKS
    publish_calls.py    the publish and replay scripts' calls and replies, typed
    queue.py            the job queue: scheduled, instant, pending; nack and scrub
    regexes.py          user patterns on RE2, and why one is refused
    replicas.py         the replica barrier: fence and WAIT
    retention.py        payload retention: a topic's own, else the bus's; its scripts' calls
    route.py            routes: which events, on which lane, for how long
    sealed.py           write-only secrets sealed at rest (AES-256-GCM)
    schema_faults.py    what a JSON Schema check found: where, and what is wrong
    schema_calls.py     the event schema scripts' calls and replies, typed
    schemas.py          event schemas: bounded, compiled offline, checked at publish
    secrets.py          signing secrets: created, read, rotated
    shed_calls.py       the expiry and autodrop scripts' calls and replies, typed
    subscriber_calls.py the subscription, topic and dead letter scripts' calls, typed
    subscriber_detail.py  a subscriber's queue per lane, its health, its partitions
    subscriber_pages.py  GET /subscriptions a page at a time: name order, the cursor
    subscribers.py      subscribers: create, replace, list, unsubscribe, delete
    subscription.py     the body of POST /subscription, validated
    token_calls.py      the token scripts' calls and replies, typed
    tokens.py           API tokens: which clients exist, their names, which token acts as whom
    topics.py           topics as GET /topics and DELETE /topics/:name see them
    trace_context.py    W3C traceparent and tracestate
    transform.py        a route's transform: JSONata compiled once, run under bounds
    trash.py            deleted subscribers' lanes, purged in bounded steps
    validate.py         small checks shared by event and subscription validation
"""
