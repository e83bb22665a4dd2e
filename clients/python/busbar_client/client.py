"""The bus's API from Python: one method per endpoint, typed answers, clear errors.

Retried with backoff on a 503 or no answer only where repeating is safe: reads, deletes,
subscribing (it replaces), dead-letter replay (a replay interrupted is finished by
replaying again), and publishing, which always sends a publish id (`Idempotency-Key`):
the bus queues a repeat within BUSBAR_PUBLISH_DEDUPE_S nothing twice, and its events
reach `event_ids` subscribers with the same ids whenever it is repeated. Rotating a
secret and creating a token without naming it are never retried: a repeat would rotate
twice, or be refused for the client the first made (add a second token, with `add`); a
named token posted again is answered as the first.
"""

from __future__ import annotations

import uuid as uuids
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import requests

from busbar_client.models import (
    DeadLetter,
    NewEvent,
    Route,
    Secret,
    Subscription,
    Token,
    Topic,
    TransformTried,
)
from busbar_client.transport import RetryPolicy, Transport

PUBLISH_ID_HEADER = "Idempotency-Key"
EventLike = NewEvent | Mapping[str, Any]
RouteLike = str | Route | Mapping[str, Any]


def _event(event: EventLike) -> dict[str, Any]:
    return event.to_json() if isinstance(event, NewEvent) else dict(event)


def _route(route: RouteLike) -> str | dict[str, Any]:
    if isinstance(route, str):
        return route
    return route.to_json() if isinstance(route, Route) else dict(route)


def _by_name(name: str) -> str:
    """Root reaches a subscriber by its client's name: never a token in a URL."""
    return "/subscribers/" + quote(name, safe="")


class Busbar:
    """A client of one bus with one token (a client's, or the root key)."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 0.2,
        session: requests.Session | None = None,
    ) -> None:
        policy = RetryPolicy(retries=retries, backoff=backoff)
        self._http = Transport(url, token, timeout, policy, session)

    # -- health ---------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        return self._http.call("GET", "/health").json()

    def pulse(self) -> None:
        """Returns when the bus and its Redis answer; raises otherwise."""
        self._http.call("GET", "/pulse")

    # -- tokens (root) --------------------------------------------------------------
    def create_token(
        self,
        name: str,
        token: str | None = None,
        *,
        operator: bool | None = None,
        add: bool = False,
    ) -> Token:
        """A new client of that name (Conflict when one has it: a name is one client's),
        or with `add` another token of the client of that name (NotFound when none has
        it), which acts as that client: a rotation adds the next token, moves its callers
        over, then deletes the old one (delete_token). `operator`: mark (True) or unmark
        (False) the client as one that may subscribe to busbar_operations; None leaves
        the mark as it is."""
        body: dict[str, object] = {"name": name}
        if token is not None:
            body["token"] = token
        if operator is not None:
            body["operator"] = operator
        if add:
            body["add"] = True
        answer = self._http.call("POST", "/api_tokens", body, retry=token is not None).json()
        return Token.from_json(answer)

    def tokens(self) -> list[Token]:
        response = self._http.call("GET", "/api_tokens")
        return [] if response.status_code == 204 else [Token.from_json(t) for t in response.json()]

    def delete_token(self, token: str) -> None:
        """The token goes; with it the client and its subscription when it was the
        client's last token (one of two: the client works on with the other)."""
        self._http.call("DELETE", "/api_tokens/" + quote(token, safe=""))

    # -- publishing -----------------------------------------------------------------
    def publish(
        self,
        topic: str,
        events: EventLike | Iterable[EventLike],
        *,
        publish_id: str | None = None,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> str:
        """One event or many (all or nothing); returns the publish id it was sent with.
        Pass your own publish id to make a publish you repeat later give the same ids.
        `traceparent` (and `tracestate`): the W3C trace context of your span, kept with
        the events and delivered with them (busbar ignores an invalid one)."""
        if isinstance(events, NewEvent | Mapping):
            body: Any = _event(events)
        else:
            body = [_event(e) for e in events]
        publish_id = publish_id or uuids.uuid4().hex
        headers = {PUBLISH_ID_HEADER: publish_id}
        if traceparent is not None:
            headers["traceparent"] = traceparent
            if tracestate is not None:
                headers["tracestate"] = tracestate
        self._http.call("POST", "/topics/" + quote(topic, safe=""), body, headers=headers)
        return publish_id

    def topics(self, *, mine: bool = False) -> list[Topic]:
        params = {"mine": "true"} if mine else None
        return [Topic.from_json(t) for t in self._http.call("GET", "/topics", params=params).json()]

    def delete_topic(self, topic: str) -> None:
        self._http.call("DELETE", "/topics/" + quote(topic, safe=""))

    # -- subscribing ----------------------------------------------------------------
    def subscribe(
        self,
        callback: str | None,
        topics: Sequence[RouteLike],
        *,
        uuid: str | None = None,
        timeout: int | None = None,
        max_events: int | None = None,
        max_attempts: int | None = None,
        event_ids: bool = False,
        concurrency: int | None = None,
        destination: Mapping[str, Any] | None = None,
    ) -> None:
        """Creates or replaces this client's subscription (timeout in ms). `concurrency`:
        deliveries in flight at once, each ordering key in publish order (default 1).
        `destination`: a broker the events are published to in place of a callback
        (`callback` None), e.g. `{"type": "nats", "url": "tls://nats.example.com:4222",
        "subject": "orders.{type}", "user": ..., "password": ...}` or `{"type":
        "rabbitmq", "url": "amqps://mq.example.com/orders", "exchange": "orders",
        "routing_key": "orders.{type}"}` or `{"type": "sqs", "queue_url": ..., "region":
        ..., "access_key_id": ..., "secret_access_key": ...}` (docs/destinations.md)."""
        body: dict[str, Any] = {"topics": [_route(t) for t in topics]}
        if callback is not None:
            body["callback"] = callback
        if destination is not None:
            body["destination"] = dict(destination)
        optional = {"uuid": uuid, "timeout": timeout, "max": max_events}
        body.update({k: v for k, v in optional.items() if v is not None})
        if max_attempts is not None:
            body["max_attempts"] = max_attempts
        if event_ids:
            body["event_ids"] = True
        if concurrency is not None:
            body["concurrency"] = concurrency
        self._http.call("POST", "/subscription", body)

    def unsubscribe(self) -> None:
        self._http.call("DELETE", "/subscriber")

    def unsubscribe_topic(self, topic: str) -> None:
        self._http.call("DELETE", "/subscriber/topics/" + quote(topic, safe=""))

    def subscriptions(self) -> list[Subscription]:
        """A client's own subscription; every one for the root key."""
        return [Subscription.from_json(s) for s in self._http.call("GET", "/subscriptions").json()]

    def iter_subscriptions(self, page: int = 100) -> Iterator[Subscription]:
        """subscriptions(), a page of `page` (1-1000) at a time in the order of the
        clients' names, each page asked for as the one before it is used up (the answer's
        Link rel=next): for root on a bus of thousands, no answer of megabytes."""
        path: str | None = f"/subscriptions?limit={page}"
        while path is not None:
            response = self._http.call("GET", path)
            yield from (Subscription.from_json(s) for s in response.json())
            found = response.links.get("next")
            path = found["url"] if found else None

    # -- transforms -------------------------------------------------------------------
    def try_transform(self, transform: str, event: Mapping[str, Any]) -> TransformTried:
        """Run a transform (JSONata) on one event as a subscriber receives it (`topic`,
        `type`, `url`, `key`, `t`, `data`), storing nothing; a bad expression raises
        BadRequest naming the character where it is wrong."""
        body = {"transform": transform, "event": dict(event)}
        return TransformTried.from_json(self._http.call("POST", "/transforms/test", body).json())

    # -- dead letters (a client's own; root names the subscriber) -----------------------
    def deadletters(self, subscriber: str | None = None) -> list[DeadLetter]:
        path = (_by_name(subscriber) if subscriber else "/subscriber") + "/deadletters"
        return [DeadLetter.from_json(d) for d in self._http.call("GET", path).json()]

    def replay_deadletters(self, subscriber: str | None = None) -> int:
        path = (_by_name(subscriber) if subscriber else "/subscriber") + "/deadletters/replay"
        return int(self._http.call("POST", path).json()["replayed"])

    def purge_deadletters(self, subscriber: str | None = None) -> None:
        path = (_by_name(subscriber) if subscriber else "/subscriber") + "/deadletters"
        self._http.call("DELETE", path)

    # -- signing secrets --------------------------------------------------------------
    def secret(self) -> Secret:
        """This subscriber's secret: give it to the receiver (it verifies signatures)."""
        return Secret(**self._http.call("GET", "/subscriber/secret").json())

    def rotate_secret(self) -> Secret:
        """A new secret; the old one signs too until `previous_until` (the bus's
        BUSBAR_SECRET_GRACE_S), so receivers can be moved over meanwhile."""
        return Secret(**self._http.call("POST", "/subscriber/secret/rotate", retry=False).json())

    def rotate_secret_of(self, subscriber: str) -> None:
        """Root: rotate the secret of the subscriber whose client is named so; root never
        sees it (the client reads it with its own token)."""
        self._http.call("POST", _by_name(subscriber) + "/secret/rotate", retry=False)

    # -- monitoring (root) -------------------------------------------------------------
    def metrics(self) -> str:
        return self._http.call("GET", "/metrics").text

    def workers(self) -> list[dict[str, Any]]:
        return self._http.call("GET", "/workers").json()
