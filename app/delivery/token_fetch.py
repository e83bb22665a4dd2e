"""One request to a subscriber's OAuth2 token endpoint (RFC 6749 section 4.4, client
credentials), on the engine's own client: the token URL is judged by the callback
policy as a callback is, the answer read strictly and bounded (under MAX_TOKEN_ANSWER
bytes), the whole request within BUSBAR_TIMEOUT, a client certificate presented on
https as to the callback.

The client authenticates with its secret as HTTP Basic (section 2.3.1: the id and the
secret form-urlencoded, then joined), or with a private key as an RFC 7523 assertion
(`client_assertion`, a JWT whose `iss` and `sub` are the client id and `aud` the token
URL, valid a minute). Whatever goes wrong is AuthFailed, whose message names the
problem and never holds the secret or a token: it goes to the attempt log. A token
origin whose connections are all in use (OriginBusy) holds the attempt back instead, as
a busy callback origin does.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import secrets
from typing import Any, NamedTuple
from urllib.parse import quote_plus, urlencode

from app.delivery.callback import CallbackClient
from app.delivery.identities import Identity
from app.errors import BusbarError, CallbackRefused, OriginBusy
from app.models.oauth2 import algorithm
from app.models.validate import digits
from app.services.failure import reason

MAX_TOKEN_ANSWER = 16_384  # bytes of a token endpoint's answer read at most
MAX_TOKEN = 8192  # characters of an access token
DEFAULT_LIFETIME_S = 300  # a token whose answer gives no expires_in is kept this long
ASSERTION_TTL_S = 60
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
_TOKEN = re.compile(rf"[!-~]{{1,{MAX_TOKEN}}}")  # visible ASCII: it goes in a header
_ERROR = re.compile(r"[ !#-\[\]-~]{1,64}")  # RFC 6749 section 5.2's error code, bounded


class AuthFailed(BusbarError):
    """No token: the endpoint failed, refused the client or answered nonsense."""


class Fetched(NamedTuple):
    access_token: str
    lifetime_s: int


def request_of(config: dict[str, Any], secret: str, now_s: int) -> tuple[bytes, str]:
    """The form body and the Authorization value ("" for none) of one token request."""
    form = {"grant_type": "client_credentials"}
    for name in ("scope", "audience"):
        if config.get(name):
            form[name] = config[name]
    if config["kind"] == "client_secret":
        pair = f"{quote_plus(config['client_id'])}:{quote_plus(secret)}"
        return urlencode(form).encode(), f"Basic {base64.b64encode(pair.encode()).decode()}"
    import jwt  # at first use, as app/services/push_tokens.py's

    client = config["client_id"]
    claims = {"iss": client, "sub": client, "aud": config["token_url"], "iat": now_s,
              "exp": now_s + ASSERTION_TTL_S, "jti": secrets.token_hex(16)}  # fmt: skip
    assertion = jwt.encode(claims, secret, algorithm(secret))
    form.update(client_id=config["client_id"], client_assertion_type=ASSERTION_TYPE,
                client_assertion=assertion)  # fmt: skip
    return urlencode(form).encode(), ""


def read_answer(status: int, body: bytes) -> Fetched:
    """The token and how long it lives, from the endpoint's answer; AuthFailed else."""
    found: Any = None
    if len(body) < MAX_TOKEN_ANSWER:
        try:
            found = json.loads(body)
        except ValueError:
            found = None
    if not 200 <= status < 300:
        error = found.get("error") if isinstance(found, dict) else None
        said = f" ({error})" if isinstance(error, str) and _ERROR.fullmatch(error) else ""
        raise AuthFailed(f"the token endpoint answered {status}{said}")
    if not isinstance(found, dict):
        raise AuthFailed(f"the token endpoint's answer is not a JSON object under "
                         f"{MAX_TOKEN_ANSWER // 1024} KiB")  # fmt: skip
    token, kind = found.get("access_token"), found.get("token_type", "bearer")
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        raise AuthFailed(f"the token endpoint's answer has no access_token of 1 to "
                         f"{MAX_TOKEN} visible ASCII characters")  # fmt: skip
    if not isinstance(kind, str) or kind.lower() != "bearer":
        raise AuthFailed("the token endpoint's token_type is not bearer")
    lifetime = found.get("expires_in", DEFAULT_LIFETIME_S)
    if isinstance(lifetime, str) and digits(lifetime):
        lifetime = int(lifetime)
    if isinstance(lifetime, bool) or not isinstance(lifetime, int | float) or lifetime <= 0:
        raise AuthFailed("the token endpoint's expires_in is not a positive number")
    return Fetched(token, int(lifetime))


async def fetch(
    http: CallbackClient,
    config: dict[str, Any],
    secret: str,
    identity: Identity | None,
    now_s: int,
    timeout: float,
) -> Fetched:
    """A new access token from the endpoint, within `timeout` (connection included)."""
    url = config["token_url"]
    body, authorization = request_of(config, secret, now_s)
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
    try:
        async with asyncio.timeout(timeout):
            connection = await http.connection(url, identity)
            answer = await http.exchange(
                url, body, headers, "", connection, None, identity,
                authorization=authorization, limit=MAX_TOKEN_ANSWER, timed=False,
            )  # fmt: skip
    except CallbackRefused as exc:
        raise AuthFailed(f"the token URL is refused: {exc.message}") from None
    except OriginBusy:  # its connections are all in use: the attempt waits, unsent
        raise
    except TimeoutError:
        raise AuthFailed(f"the token endpoint did not answer within {timeout:g} s") from None
    except Exception as exc:  # every way the request fails is a failed fetch
        raise AuthFailed(f"the token endpoint could not be asked: {reason(exc)}") from None
    return read_answer(answer.status, answer.body)
