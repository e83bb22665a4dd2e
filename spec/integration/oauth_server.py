"""An OAuth2 authorization server for the tests, built on authlib's server side (not a
hand-rolled responder): a token endpoint granting client credentials to clients that
authenticate with a secret (HTTP Basic) or a private-key JWT (RFC 7523), and the
receiving side's check of a bearer token (authlib's BearerTokenValidator: known, not
expired, not revoked, of the scope asked). It counts token requests per client, can
revoke tokens and can be made to fail (`down`: 503 to every request)."""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, TokenMixin, grants
from authlib.oauth2.rfc6750 import BearerTokenValidator
from authlib.oauth2.rfc7523 import JWTBearerClientAssertion
from flask import Flask
from joserfc.jwk import ECKey
from werkzeug.serving import WSGIRequestHandler, make_server

from spec.integration.tls import server_context

os.environ.setdefault("AUTHLIB_INSECURE_TRANSPORT", "1")  # the tests' endpoint is plain http


@dataclass
class Client(ClientMixin):
    client_id: str
    secret: str | None = None
    public_key: str | None = None  # PEM: private_key_jwt
    scope: str = "events"

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return ""

    def get_allowed_scope(self, scope: str) -> str:
        asked = set((scope or "").split())
        return " ".join(s for s in self.scope.split() if s in asked) if asked else self.scope

    def check_redirect_uri(self, redirect_uri: str) -> bool:  # noqa: ARG002  # authlib's signature
        return False

    def check_client_secret(self, client_secret: str) -> bool:
        return self.secret is not None and secrets.compare_digest(client_secret, self.secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:  # noqa: ARG002  # authlib's signature
        wanted = "client_secret_basic" if self.secret is not None else "private_key_jwt"
        return method == wanted

    def check_response_type(self, response_type: str) -> bool:  # noqa: ARG002  # authlib's signature
        return False

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type == "client_credentials"


@dataclass
class Token(TokenMixin):
    client_id: str
    access_token: str
    scope: str
    issued_at: float
    expires_in: int
    revoked: bool = False

    def check_client(self, client: Any) -> bool:
        return client.get_client_id() == self.client_id

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return self.expires_in

    def is_expired(self) -> bool:
        return time.time() >= self.issued_at + self.expires_in

    def is_revoked(self) -> bool:
        return self.revoked


@dataclass
class TokenServer:
    url: str = ""
    clients: dict[str, Client] = field(default_factory=dict)
    tokens: dict[str, Token] = field(default_factory=dict)
    requests: int = 0  # token requests, answered or not
    down: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, client_id: str, secret: str | None = None, public_key: str | None = None) -> None:
        self.clients[client_id] = Client(client_id, secret, public_key)

    def issued(self, client_id: str) -> list[Token]:
        with self.lock:
            return [t for t in self.tokens.values() if t.client_id == client_id]

    def revoke_all(self, client_id: str) -> None:
        with self.lock:
            for token in self.tokens.values():
                if token.client_id == client_id:
                    token.revoked = True

    def check(self, authorization: str, scope: str = "events") -> str | None:
        """The client a request's `Authorization: Bearer` token was issued to, or None
        when the token is not valid (authlib's validator decides)."""
        kind, _, value = authorization.partition(" ")
        if kind.lower() != "bearer" or not value:
            return None
        validator = Validator(self)
        try:
            token = validator.authenticate_token(value)
            validator.validate_token(token, [scope], None)
        except Exception:  # authlib's InvalidTokenError, InsufficientScopeError
            return None
        return token.client_id


class Validator(BearerTokenValidator):
    def __init__(self, server: TokenServer) -> None:
        super().__init__()
        self._server = server

    def authenticate_token(self, token_string: str) -> Token | None:
        with self._server.lock:
            return self._server.tokens.get(token_string)


class Assertion(JWTBearerClientAssertion):
    """private_key_jwt: the client's assertion checked against its registered key."""

    CLIENT_AUTH_METHOD = "private_key_jwt"

    def __init__(self, server: TokenServer, token_url: str) -> None:
        super().__init__(validate_jti=True)
        self._server, self._token_url = server, token_url
        self._seen: set[str] = set()

    def get_audiences(self) -> list[str]:
        return [self._token_url]

    def validate_jti(self, claims: dict, jti: str) -> bool:  # noqa: ARG002  # authlib's signature
        if jti in self._seen:
            return False
        self._seen.add(jti)
        return True

    def resolve_client_public_key(self, client: Client, headers: dict | None = None) -> Any:  # noqa: ARG002  # authlib's signature
        return ECKey.import_key(client.public_key or "")


class Credentials(grants.ClientCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ("client_secret_basic", "private_key_jwt")


def _app(server: TokenServer, token_url: str, lifetime_s: int) -> Flask:
    app = Flask("tokens")
    app.config["OAUTH2_TOKEN_EXPIRES_IN"] = {"client_credentials": lifetime_s}

    def query_client(client_id: str) -> Client | None:
        return server.clients.get(client_id)

    def save_token(token: dict, request: Any) -> None:
        with server.lock:
            server.tokens[token["access_token"]] = Token(
                request.client.get_client_id(), token["access_token"], token.get("scope", ""),
                time.time(), int(token["expires_in"]),
            )  # fmt: skip

    authorization = AuthorizationServer(app, query_client=query_client, save_token=save_token)
    authorization.register_grant(Credentials)
    authorization.register_client_auth_method(
        Assertion.CLIENT_AUTH_METHOD, Assertion(server, token_url)
    )

    @app.post("/token")
    def token() -> Any:
        with server.lock:
            server.requests += 1
            if server.down:
                return {"error": "temporarily_unavailable"}, 503
        return authorization.create_token_response()

    return app


class Quiet(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


@contextlib.contextmanager
def token_server(
    lifetime_s: int = 3600, tls: tuple[Path, Path] | None = None, client_ca: Path | None = None
) -> Iterator[TokenServer]:
    """Serving on 127.0.0.1 at a free port: POST <url> is the token endpoint. `tls`:
    (certificate, key) to serve https; `client_ca`: with it, only clients with a
    certificate that CA signed are served (mutual TLS)."""
    server = TokenServer()
    apps: list[Flask] = []
    context = server_context(tls, client_ca) if tls is not None else None
    http = make_server("127.0.0.1", 0, lambda env, start: apps[0](env, start), threaded=True,
                       request_handler=Quiet, ssl_context=context)  # fmt: skip
    scheme = "https" if context is not None else "http"
    server.url = f"{scheme}://127.0.0.1:{http.server_port}/token"
    apps.append(_app(server, server.url, lifetime_s))
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        http.shutdown()
        thread.join(10)
