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
from app.models.callback_policy import PRODUCTION, Policy
from app.models.filters import DEFAULT_BOUNDS, Bounds

Doc = dict[str, Any]
INT64_MIN, UINT64_MAX = -(2**63), 2**64 - 1  # what msgpack stores
DATA_VALUE_REF: Doc = {"$ref": "#/components/schemas/DataValue"}
# Any JSON value msgpack can store: what an event's `data` may hold at any depth.
DATA_VALUE: Doc = {
    "nullable": True,
    "anyOf": [
        {"type": "string"},
        {"type": "boolean"},
        {"type": "integer", "minimum": INT64_MIN, "maximum": UINT64_MAX},
        {"type": "number", "minimum": INT64_MIN, "maximum": UINT64_MAX},
        {"type": "array", "items": DATA_VALUE_REF},
        {"type": "object", "additionalProperties": DATA_VALUE_REF},
    ],
}


@dataclass(frozen=True)
class Rules:
    """The settings some checks depend on."""

    allow_http: bool = False
    callbacks: Policy = PRODUCTION  # nothing internal opened
    filters: Bounds = DEFAULT_BOUNDS  # BUSBAR_FILTER_MAX_*: a route's content filter
    # BUSBAR_TRANSFORM_MAX_BYTES and BUSBAR_MAX_EVENT_DATA: a route's transform's source,
    # and what its one-call built-ins may make
    transforms: tuple[int, int] = (4096, 256 * 1024)


class Field(ABC):
    nullable: bool = False
    description: str = ""

    @abstractmethod
    def check(self, value: Any, where: str, rules: Rules) -> Any:
        """The value if valid (never None unless nullable), else InvalidInput."""

    @abstractmethod
    def shape(self, rules: Rules) -> Doc:
        """The OpenAPI 3.0 schema of a valid value, without nullability."""

    def openapi(self, rules: Rules) -> Doc:
        """The schema under `rules`: the document a server publishes is the one it applies."""
        doc = self.shape(rules)
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

    def shape(self, rules: Rules) -> Doc:
        return {"type": "string", "pattern": f"^{validate.TOPIC_PATTERN.pattern}$"}


@dataclass(frozen=True)
class Integer(Field):
    low: int = 0
    high: int | None = None
    nullable: bool = False
    description: str = ""

    def check(self, value: Any, where: str, rules: Rules) -> int:
        return validate.integer(value, where, self.low, self.high)

    def shape(self, rules: Rules) -> Doc:
        doc: Doc = {"type": "integer", "minimum": self.low}
        if self.high is not None:
            doc["maximum"] = self.high
        return doc


@dataclass(frozen=True)
class Url(Field):
    description: str = "https URL (http too with BUSBAR_ALLOW_HTTP), no query string"
    userinfo: bool = True  # whether user:password@ may come before the host

    def check(self, value: Any, where: str, rules: Rules) -> str:
        return validate.url(value, where, rules.allow_http)

    def shape(self, rules: Rules) -> Doc:
        """The validator's own rule (validate.url_pattern), under the server's settings."""
        pattern = validate.url_pattern(rules.allow_http, self.userinfo)
        return {"type": "string", "maxLength": validate.MAX_URL, "pattern": pattern}


@dataclass(frozen=True)
class Choice(Field):
    values: Sequence[str] = ()
    description: str = ""

    def check(self, value: Any, where: str, rules: Rules) -> str:
        if not isinstance(value, str) or value not in self.values:  # values are str
            raise InvalidInput(f"{where} must be one of {', '.join(self.values)}")
        return value

    def shape(self, rules: Rules) -> Doc:
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

    def shape(self, rules: Rules) -> Doc:
        items = {"type": "string", "enum": list(self.values)}
        return {"type": "array", "minItems": 1, "items": items}


@dataclass(frozen=True)
class Boolean(Field):
    description: str = ""
    nullable: bool = False

    def check(self, value: Any, where: str, rules: Rules) -> bool:
        if not isinstance(value, bool):
            raise InvalidInput(f"{where} must be true or false")
        return value

    def shape(self, rules: Rules) -> Doc:
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

    def shape(self, rules: Rules) -> Doc:
        return {
            "type": "string",
            "minLength": self.low,
            "maxLength": self.high,
            "pattern": f"^{self.pattern.pattern}$",
        }


@dataclass(frozen=True)
class Utf8(Field):
    """Any text without control characters, bounded in UTF-8 bytes (what it costs to store),
    not characters: an ordering key is an opaque name, and publishers' ids are not ASCII."""

    low: int = 1
    high: int = 256
    nullable: bool = False
    description: str = ""

    def check(self, value: Any, where: str, rules: Rules) -> str:
        size = len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else -1
        if not self.low <= size <= self.high:
            raise InvalidInput(f"{where} must be a string of {self.low} to {self.high} bytes")
        text: str = value
        if _CONTROL.search(text):
            raise InvalidInput(f"{where} must hold no control characters")
        if not _encodable(text):
            raise InvalidInput(f"{where} must be valid UTF-8 (it holds a lone surrogate)")
        return text

    def shape(self, rules: Rules) -> Doc:
        """JSON Schema counts characters where the rule counts bytes, so the document
        shows the ASCII form, where the two agree: all it allows, the server takes."""
        return {
            "type": "string",
            "minLength": self.low,
            "maxLength": self.high,
            "pattern": "^[ -~]*$",
        }


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _encodable(value: str) -> bool:
    """Whether `value` is valid UTF-8 once encoded (JSON may carry a lone surrogate)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True)
class JsonObject(Field):
    """A JSON object msgpack can store (integers within 64 bits); its size is the model's
    business (it depends on settings)."""

    nullable: bool = False
    description: str = ""

    def check(self, value: Any, where: str, rules: Rules) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise InvalidInput(f"{where} must be a JSON object")
        return value

    def shape(self, rules: Rules) -> Doc:
        return {
            "type": "object",
            "additionalProperties": {"$ref": "#/components/schemas/DataValue"},
        }


@dataclass(frozen=True)
class Checked(Field):
    """A check that is a function of its own (it predates these types), its schema stated
    beside it; `where` is already in the function's messages."""

    func: Callable[[Any], Any] = str
    doc: Doc = field(default_factory=dict)
    description: str = ""

    def check(self, value: Any, where: str, rules: Rules) -> Any:
        return self.func(value)

    def shape(self, rules: Rules) -> Doc:
        return dict(self.doc)


@dataclass(frozen=True)
class Shape:
    """A JSON object's fields: which exist, which are required. Unknown keys are refused."""

    fields: dict[str, Field]
    required: tuple[str, ...] = ()
    # what leaving a field out does, for the 400 that refuses its null (default: below)
    left_out: dict[str, str] = field(default_factory=dict)

    def openapi(self, rules: Rules) -> Doc:
        doc: Doc = {
            "type": "object",
            "properties": {name: f.openapi(rules) for name, f in self.fields.items()},
            "additionalProperties": False,
        }
        if self.required:
            doc["required"] = list(self.required)
        return doc

    def known(self, body: dict[str, Any], what: str) -> None:
        validate.known_keys(body, self.fields.keys(), what)

    def given(self, body: dict[str, Any], name: str, where: str, rules: Rules) -> Any:
        """The field's checked value, or None when it is left out, or null where a null is
        taken (a `nullable` field: null means what leaving it out means). Any other null
        is a 400 naming the field, rather than a default the caller did not ask for: a
        null may as well mean "none" or "remove" (docs/api.md, Nulls)."""
        value = body.get(name)
        if value is not None:
            return self.fields[name].check(value, where, rules)
        if name in body and not self.fields[name].nullable:
            meaning = self.left_out.get(name, "for the default")
            raise InvalidInput(f"{where}: null is not allowed; leave it out {meaning}")
        return None
