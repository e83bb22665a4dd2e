"""Field definitions that both validate request bodies and describe them in OpenAPI.

Each model (event, route, subscription, token) declares its fields once with these
types; its parser calls `check` and `GET /openapi.json` is built from `openapi()`. So the
published schema cannot drift from what the API accepts: there is no second copy.
Messages are the API's 400 messages and always name the field (`where`).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.errors import InvalidInput
from app.models import validate
from config.parsers import Network
from config.settings import CALLBACK_DENY

Doc = dict[str, Any]
URL_PATTERN = r"^https?://[a-z0-9.-]{1,63}(:[0-9]{1,5})?(/[A-Za-z0-9._~%/-]{0,200})?$"


@dataclass(frozen=True)
class Rules:
    """The settings some checks depend on."""

    allow_http: bool = False
    allow_link_local: bool = False
    refused: tuple[Network, ...] = CALLBACK_DENY  # BUSBAR_CALLBACK_DENY


class Field(ABC):
    nullable: bool = False
    description: str = ""

    @abstractmethod
    def check(self, value: Any, where: str, rules: Rules) -> Any:
        """The value if valid (never None unless nullable), else InvalidInput."""

    @abstractmethod
    def shape(self) -> Doc:
        """The OpenAPI 3.0 schema of a valid value, without nullability."""

    def openapi(self) -> Doc:
        doc = self.shape()
        if self.description:
            doc["description"] = self.description
        if self.nullable:
            doc["nullable"] = True
        return doc


@dataclass(frozen=True)
class TopicName(Field):
    description: str = "topic name"

    def check(self, value: Any, where: str, rules: Rules) -> str:
        return validate.topic_name(value, where)

    def shape(self) -> Doc:
        return {"type": "string", "pattern": f"^{validate.TOPIC_PATTERN.pattern}$"}


@dataclass(frozen=True)
class Integer(Field):
    low: int = 0
    high: int | None = None
    nullable: bool = False
    description: str = ""

    def check(self, value: Any, where: str, rules: Rules) -> int:
        return validate.integer(value, where, self.low, self.high)

    def shape(self) -> Doc:
        doc: Doc = {"type": "integer", "minimum": self.low}
        if self.high is not None:
            doc["maximum"] = self.high
        return doc


@dataclass(frozen=True)
class Url(Field):
    description: str = "https URL (http too with BUSBAR_ALLOW_HTTP), no query string"

    def check(self, value: Any, where: str, rules: Rules) -> str:
        return validate.url(value, where, rules.allow_http)

    def shape(self) -> Doc:
        # A plain subset of what validate.url accepts (scheme, host, no query, no spaces or
        # control characters), so generated examples are valid; http since a bus may allow it.
        return {"type": "string", "maxLength": validate.MAX_URL, "pattern": URL_PATTERN}


@dataclass(frozen=True)
class Choice(Field):
    values: Sequence[str] = ()
    description: str = ""

    def check(self, value: Any, where: str, rules: Rules) -> str:
        if value not in self.values:
            raise InvalidInput(f"{where} must be one of {', '.join(self.values)}")
        return value

    def shape(self) -> Doc:
        return {"type": "string", "enum": list(self.values)}


@dataclass(frozen=True)
class ChoiceList(Field):
    """A non-empty list of choices: the order of `values` is kept, repeats dropped."""

    values: Sequence[str] = ()
    what: str = "values"
    nullable: bool = False
    description: str = ""

    def check(self, value: Any, where: str, rules: Rules) -> tuple[str, ...]:
        if not isinstance(value, list) or not value:
            raise InvalidInput(f"{where} must be a non-empty list of {self.what}")
        if any(v not in self.values for v in value):
            raise InvalidInput(f"{where} may only hold {', '.join(self.values)}")
        return tuple(v for v in self.values if v in value)

    def shape(self) -> Doc:
        items = {"type": "string", "enum": list(self.values)}
        return {"type": "array", "minItems": 1, "items": items}


@dataclass(frozen=True)
class Boolean(Field):
    description: str = ""

    def check(self, value: Any, where: str, rules: Rules) -> bool:
        if not isinstance(value, bool):
            raise InvalidInput(f"{where} must be true or false")
        return value

    def shape(self) -> Doc:
        return {"type": "boolean"}


@dataclass(frozen=True)
class Text(Field):
    """A string of bounded length whose every character matches `chars` (a regex class)."""

    chars: str = r"[!-~]"
    low: int = 1
    high: int = 64
    rule: str = "printable ASCII"
    nullable: bool = False
    description: str = ""
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pattern", re.compile(f"{self.chars}{{{self.low},{self.high}}}"))

    def check(self, value: Any, where: str, rules: Rules) -> str:
        if not isinstance(value, str) or not self.low <= len(value) <= self.high:
            raise InvalidInput(f"{where} must be a string of {self.low} to {self.high} characters")
        if not self.pattern.fullmatch(value):
            raise InvalidInput(f"{where} must be {self.rule}")
        return value

    def shape(self) -> Doc:
        return {
            "type": "string",
            "minLength": self.low,
            "maxLength": self.high,
            "pattern": f"^{self.pattern.pattern}$",
        }


@dataclass(frozen=True)
class JsonObject(Field):
    """Any JSON object; its size is the model's business (it depends on settings)."""

    nullable: bool = False
    description: str = ""

    def check(self, value: Any, where: str, rules: Rules) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise InvalidInput(f"{where} must be a JSON object")
        return value

    def shape(self) -> Doc:
        return {"type": "object", "additionalProperties": True}


@dataclass(frozen=True)
class Checked(Field):
    """A check that is a function of its own (it predates these types), its schema stated
    beside it; `where` is already in the function's messages."""

    func: Callable[[Any], Any] = str
    doc: Doc = field(default_factory=dict)
    description: str = ""

    def check(self, value: Any, where: str, rules: Rules) -> Any:
        return self.func(value)

    def shape(self) -> Doc:
        return dict(self.doc)


@dataclass(frozen=True)
class Shape:
    """A JSON object's fields: which exist, which are required. Unknown keys are refused."""

    fields: dict[str, Field]
    required: tuple[str, ...] = ()

    def openapi(self) -> Doc:
        doc: Doc = {
            "type": "object",
            "properties": {name: f.openapi() for name, f in self.fields.items()},
            "additionalProperties": False,
        }
        if self.required:
            doc["required"] = list(self.required)
        return doc

    def known(self, body: dict[str, Any], what: str) -> None:
        validate.known_keys(body, set(self.fields), what)
