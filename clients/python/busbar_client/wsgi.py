"""A WSGI receiver: a WSGI app of its own (gunicorn, waitress, Werkzeug...), mountable in
any WSGI framework, and `flask_view` for a Flask route. Flask is imported only there."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from busbar_client.receiver import MAX_BODY, Receiver, Reply

log = logging.getLogger("busbar_client")
StartResponse = Callable[..., Any]
STATUS_TEXT = {
    200: "200 OK",
    204: "204 No Content",
    400: "400 Bad Request",
    401: "401 Unauthorized",
    405: "405 Method Not Allowed",
    409: "409 Conflict",
    413: "413 Payload Too Large",
    500: "500 Internal Server Error",
}


class WsgiReceiver(Receiver):
    """`handler(batch)` runs in the request's thread; its return (any value) is the 2xx."""

    def process(self, headers: dict[str, str], body: bytes) -> Reply:
        admitted = self.admit(headers, body)
        if isinstance(admitted, Reply):
            return admitted
        try:
            self.handler(admitted)
        except Exception:
            self.settle(admitted, ok=False)
            raise
        return self.settle(admitted, ok=True)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST":
            return _answer(start_response, Reply(405, "busbar delivers with POST"))
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            return _answer(start_response, Reply(413, "the body is too large or unsized"))
        body = environ["wsgi.input"].read(length) if length else b""
        headers = {k[5:].replace("_", "-"): v for k, v in environ.items() if k.startswith("HTTP_")}
        try:
            reply = self.process(headers, body)
        except Exception:
            log.exception("busbar delivery %s: the handler raised", headers.get("WEBHOOK-ID"))
            reply = Reply(500, "the receiving function failed")
        return _answer(start_response, reply)

    @property
    def flask_view(self) -> Callable[[], Any]:
        """For `app.add_url_rule(path, view_func=receiver.flask_view, methods=["POST"])`;
        an exception from the handler propagates to Flask (its error handling, a 500)."""
        from flask import Response, request

        def view() -> Any:
            reply = self.process(dict(request.headers), request.get_data())
            return Response(reply.body(), reply.status, mimetype="application/json")

        view.__name__ = f"busbar_receiver_{id(self)}"
        return view


def _answer(start_response: StartResponse, reply: Reply) -> list[bytes]:
    body = reply.body()
    headers = [("Content-Length", str(len(body)))]
    if body:
        headers.append(("Content-Type", "application/json"))
    start_response(STATUS_TEXT.get(reply.status, f"{reply.status} Error"), headers)
    return [body]
