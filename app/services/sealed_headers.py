"""A subscription's headers between the API and Redis: secrets sealed on the way in
(POST /subscription), opened on the way out (the worker's send step), never anywhere
else. app/models/callback_headers.py says what a subscriber may give."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping

from redis import Redis

from app.errors import InvalidInput
from app.lua import Scripts
from app.models import client_cert, destination, oauth2, push_keys
from app.models import subscriber_calls as calls
from app.models.callback_headers import Header, stored
from app.models.keys import Keys
from app.models.sealed import Sealer, Unsealable
from app.redis_client import text
from config.settings import Settings

KEEP = ""  # subscribe.lua: the stored headers stay as they are
REMEMBERED = 4096  # opened header sets a worker keeps (one per subscriber and content)


def sealer_of(settings: Settings) -> Sealer:
    """Sealed under BUSBAR_SECRET_KEY (default: the root key), opened by it or a key
    in BUSBAR_SECRET_KEY_PREVIOUS."""
    previous = [k.encode() for k in settings.secret_keys_previous]
    return Sealer(settings.signing_key, previous)


def where(token: str, name: str) -> str:
    """A sealed value's place: its subscriber and header (the AEAD's associated data)."""
    return f"subscriber {token} header {name.lower()}"


def to_store(
    given: tuple[Header, ...] | None,
    current: bytes | None,
    sealer: Sealer,
    token: str,
    now: int,
) -> str:
    """subscribe.lua's `headers` argument: KEEP when none were given, else the field's
    new text (`[]`: none). A secret given without a value keeps the stored one; a secret
    given again is sealed again, with a new set_at."""
    if given is None:
        return KEEP
    kept = {row[0].lower(): row for row in stored(current) if row[2]}
    rows = []
    for header in given:
        if header.value is None:
            row = kept.get(header.name.lower())
            if row is None:
                raise InvalidInput(
                    f"headers.{header.name}: no secret is stored under that name to keep; "
                    "give its value"
                )
            rows.append([header.name, row[1], 1, row[3]])
        elif header.secret:
            sealed = sealer.seal(header.value, where(token, header.name))
            rows.append([header.name, sealed, 1, now])
        else:
            rows.append([header.name, header.value, 0, now])
    return json.dumps(rows, separators=(",", ":"))


class HeaderBook:
    """The worker's side: a subscriber's headers opened once per stored content, not at
    every delivery (AES-GCM is cheap, JSON and a dict per delivery are not free)."""

    def __init__(self, sealer: Sealer | Callable[[], Sealer]) -> None:
        """`sealer`, or how to make it at the first secret: a worker whose subscribers
        have none needs no key for them (it signs with one all the same)."""
        self._sealer = sealer
        self._opened: dict[tuple[str, bytes], Mapping[str, str]] = {}

    @property
    def sealer(self) -> Sealer:
        if not isinstance(self._sealer, Sealer):
            self._sealer = self._sealer()
        return self._sealer

    def of(self, token: str, raw: bytes) -> Mapping[str, str]:
        """The headers to send; Unsealable when a secret does not open."""
        if not raw:
            return {}
        found = self._opened.get((token, raw))
        if found is None:
            found = {
                name: self._opened_value(token, name, value) if secret else value
                for name, value, secret, _ in stored(raw)
            }
            if len(self._opened) >= REMEMBERED:
                self._opened.clear()
            self._opened[(token, raw)] = found
        return found

    def _opened_value(self, token: str, name: str, value: str) -> str:
        try:
            return self.sealer.open(value, where(token, name))
        except Unsealable as exc:
            raise Unsealable(f"header {name.lower()}: {exc.message}") from None


def resealed(raw: bytes | None, sealer: Sealer, token: str) -> tuple[str, int]:
    """The field with every secret sealed under the current key, and how many were not."""
    rows, count = stored(raw), 0
    for row in rows:
        name, value, secret, _ = row
        if secret and not sealer.is_current(value):
            place = where(token, name)
            row[1] = sealer.seal(sealer.open(value, place), place)
            count += 1
    return json.dumps(rows, separators=(",", ":")), count


def reseal(
    client: Redis, keys: Keys, scripts: Scripts, sealer: Sealer, tokens: Iterable[str]
) -> tuple[int, int]:
    """`busbar secrets reseal`: (places changed, secrets sealed again), over every
    subscriber's headers, client certificate's key, OAuth2 secret and destination's
    password or token, and the push keys' private halves. A field changed meanwhile (a
    POST /subscription sealed its own secrets under the current key) is read again."""
    places = values = 0
    for token in tokens:
        for field, again in (
            ("headers", resealed), ("client_cert", client_cert.resealed), ("auth", oauth2.resealed),
            ("destination", destination.resealed),
        ):  # fmt: skip
            redo = functools.partial(again, sealer=sealer, token=token)
            found = _reseal(client, scripts, keys.subscriber(token), field, redo)
            places, values = places + bool(found), values + found
    for field in [text(f) for f in client.hkeys(keys.push_keys)]:
        if field.startswith("key:"):
            kid = field.removeprefix("key:")
            again = functools.partial(push_keys.resealed, sealer=sealer, kid=kid)
            found = _reseal(client, scripts, keys.push_keys, field, again)
            places, values = places + bool(found), values + found
    return places, values


def _reseal(
    client: Redis, scripts: Scripts, key: str, field: str,
    again: Callable[[bytes], tuple[str, int]],
) -> int:  # fmt: skip
    while True:
        raw: bytes | None = client.hget(key, field)  # type: ignore[assignment]
        if not raw:
            return 0
        new, count = again(raw)
        if not count or scripts.run(calls.swap(key, field, raw.decode(), new)):
            return count
