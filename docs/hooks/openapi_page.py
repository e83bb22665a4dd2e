"""MkDocs hook: the API reference of docs/api.md, rendered from the OpenAPI document the
server serves, and that document itself written into the site as openapi.json.

The document is what `GET /openapi.json` answers from a `busbar web` with the default
settings: the hook builds the Flask app and asks it, so the page can never describe
another API than the server's. Building the app connects to nothing (redis-py connects
on first use, and this route never uses Redis), so `make docs` needs no Redis.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

MARKER = "<!-- openapi-reference -->"
PAGE = "api.md"
METHODS = ("get", "post", "put", "patch", "delete")
LONG_PATTERN = 60  # longer regexes are left to openapi.json: a table cell cannot hold them

Doc = dict[str, Any]


def served_document() -> Doc:
    """GET /openapi.json of an app built with the default settings."""
    from app.web import create_app
    from config.settings import Settings

    settings = Settings(redis_url="redis://127.0.0.1:1/0", root_key="docs-build-root-key")
    answer = create_app(settings).test_client().get("/openapi.json")
    if answer.status_code != 200:
        raise PluginError(f"GET /openapi.json answered {answer.status_code}")
    document: Doc = answer.get_json()
    return document


def anchor(name: str) -> str:
    return f"schema-{name.lower()}"


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def code(text: str) -> str:
    return f"`{text}`"


def constraints(schema: Doc) -> list[str]:
    said = []
    if "enum" in schema:
        said.append("one of " + ", ".join(code(json.dumps(v)) for v in schema["enum"]))
    if "pattern" in schema:
        pattern = schema["pattern"]
        short = len(pattern) <= LONG_PATTERN
        said.append(f"matching {code(pattern)}" if short else "matching a long pattern")
    if "not" in schema:
        said.append("not " + (", ".join(constraints(schema["not"])) or "the schema given"))
    for low, high, unit in (
        ("minimum", "maximum", ""),
        ("minLength", "maxLength", " characters"),
        ("minItems", "maxItems", " items"),
    ):
        if low in schema and high in schema:
            said.append(f"{schema[low]}..{schema[high]}{unit}")
        elif high in schema:
            said.append(f"at most {schema[high]}{unit}")
        elif low in schema:
            said.append(f"at least {schema[low]}{unit.rstrip('s') if schema[low] == 1 else unit}")
    return said


def limits(schema: Doc) -> str:
    said = constraints(schema)
    return " (" + "; ".join(said) + ")" if said else ""


def kind(schema: Doc) -> str:
    """A schema in a few words: its type, what it refers to, its limits."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        text = f"[{name}](#{anchor(name)})"
    elif "oneOf" in schema or "anyOf" in schema:
        text = " or ".join(kind(s) for s in schema.get("oneOf", schema.get("anyOf", [])))
    elif schema.get("type") == "array":
        text = "array" + limits(schema) + " of " + kind(schema.get("items", {}))
    elif schema.get("type") == "object" and isinstance(schema.get("additionalProperties"), dict):
        text = "object of " + kind(schema["additionalProperties"])
    else:
        text = schema.get("type", "any value") + limits(schema)
    if schema.get("nullable"):
        text += " or null"
    return text


def nested(schema: Doc) -> list[tuple[str, Doc]]:
    """The inline objects a property holds, with the suffix their fields are named by."""
    if schema.get("type") == "array":
        return [("[]" + suffix, s) for suffix, s in nested(schema.get("items", {}))]
    found = []
    for option in schema.get("oneOf", schema.get("anyOf", [])):
        found += nested(option)
    if schema.get("type") == "object" and "properties" in schema:
        found.append(("", schema))
    return found


def field_rows(schema: Doc, prefix: str = "") -> list[str]:
    rows = []
    required = set(schema.get("required", ()))
    for name, prop in schema.get("properties", {}).items():
        needed = "yes" if name in required else "no"
        meaning = cell(prop.get("description", ""))
        rows.append(f"| {code(prefix + name)} | {cell(kind(prop))} | {needed} | {meaning} |")
        for suffix, inner in nested(prop):
            rows += field_rows(inner, f"{prefix}{name}{suffix}.")
    return rows


def fields_table(schema: Doc) -> list[str]:
    head = ["| field | type | required | meaning |", "|---|---|---|---|"]
    return head + field_rows(schema)


def render_operation(method: str, path: str, op: Doc) -> list[str]:
    summary = op.get("summary", "")
    lines = [f"### `{method.upper()} {path}`", "", summary[:1].upper() + summary[1:] + ".", ""]
    lines += [op.get("description", ""), ""]
    parameters = op.get("parameters", [])
    if parameters:
        lines += ["| parameter | in | required | schema | meaning |", "|---|---|---|---|---|"]
        for p in parameters:
            needed = "yes" if p.get("required") else "no"
            meaning = p.get("description", p.get("schema", {}).get("description", ""))
            schema = {k: v for k, v in p.get("schema", {}).items() if k != "description"}
            lines.append(
                f"| {code(p['name'])} | {p['in']} | {needed} | {cell(kind(schema))} "
                f"| {cell(meaning)} |"
            )
        lines.append("")
    body = op.get("requestBody")
    if body:
        for media, content in body.get("content", {}).items():
            needed = "required" if body.get("required") else "optional"
            lines += [f"Body ({media}, {needed}): {kind(content.get('schema', {}))}.", ""]
    lines += ["| status | meaning | body |", "|---|---|---|"]
    for status, answer in op.get("responses", {}).items():
        schemas = [c.get("schema", {}) for c in answer.get("content", {}).values()]
        shown = " or ".join(kind(s) for s in schemas) or "none"
        lines.append(f"| {status} | {cell(answer.get('description', ''))} | {cell(shown)} |")
    return [*lines, ""]


def render(document: Doc) -> str:
    info = document.get("info", {})
    lines = [
        f"OpenAPI {document.get('openapi')}, *{info.get('title')}* {info.get('version')}: "
        f"{info.get('description', '')} Patterns longer than {LONG_PATTERN} characters are "
        'shown as "a long pattern": openapi.json has them.',
        "",
    ]
    for path, item in document.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                lines += render_operation(method, path, item[method])
    lines += ["## Schemas", ""]
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        lines += [f"### {name} {{#{anchor(name)}}}", ""]
        if schema.get("description"):
            lines += [schema["description"], ""]
        if "properties" in schema:
            if schema.get("additionalProperties") is False:
                lines += ["No other keys.", ""]
            lines += [*fields_table(schema), ""]
        else:
            lines += [kind(schema) + ".", ""]
    return "\n".join(lines)


_document: Doc | None = None


def document() -> Doc:
    global _document
    if _document is None:
        _document = served_document()
    return _document


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise PluginError(f"docs/{PAGE} lacks the marker {MARKER} the reference goes in")
    return markdown.replace(MARKER, render(document()))


def on_post_build(config: MkDocsConfig) -> None:
    target = Path(config.site_dir) / "openapi.json"
    target.write_text(json.dumps(document(), indent=1) + "\n")
