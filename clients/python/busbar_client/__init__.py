"""busbar's Python client: `Busbar` talks to the bus; `WsgiReceiver` and `AsgiReceiver`
take its signed deliveries (busbar_client.wsgi, busbar_client.asgi)."""

from busbar_client.asgi import AsgiReceiver
from busbar_client.client import Busbar
from busbar_client.errors import (
    BadRequest,
    BusbarError,
    Conflict,
    ConnectionFailed,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    ServerError,
    TooManyRequests,
    Unauthorized,
    Unavailable,
)
from busbar_client.models import (
    Batch,
    Circuit,
    DeadLetter,
    Event,
    NewEvent,
    Route,
    Secret,
    Subscription,
    Token,
    Topic,
    TransformTried,
)
from busbar_client.receiver import ReplayGuard
from busbar_client.wsgi import WsgiReceiver

__all__ = [
    "AsgiReceiver",
    "BadRequest",
    "Batch",
    "Busbar",
    "BusbarError",
    "Circuit",
    "Conflict",
    "ConnectionFailed",
    "DeadLetter",
    "Event",
    "Forbidden",
    "NewEvent",
    "NotFound",
    "PayloadTooLarge",
    "ReplayGuard",
    "Route",
    "Secret",
    "ServerError",
    "Subscription",
    "Token",
    "TooManyRequests",
    "Topic",
    "TransformTried",
    "Unauthorized",
    "Unavailable",
    "WsgiReceiver",
]
