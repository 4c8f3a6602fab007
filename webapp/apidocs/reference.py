"""The reference page's content, read from the OpenAPI document (`document.DOCUMENT`): one
section per tag, one entry per operation (method, path, summary, parameters, an example
request body, responses), then the schemas. Nothing here is written twice: the page shows
what `/api/openapi.json` says.

Descriptions are Markdown written in this package; they are rendered with raw HTML switched off.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup

from webapp.apidocs.document import DOCUMENT
from webapp.params import MAX_DATABASE_ID

METHODS = ("get", "post", "put", "patch", "delete")
EXAMPLE_WIDTH = 72  # characters on one line of an example before it is broken up
MAX_LEVEL = 8  # indentation levels static/apidocs.css draws (.l0 to .l8)
_markdown = MarkdownIt("commonmark", {"html": False})


def markdown(text: str | None) -> Markup:
    # Raw HTML is off: whatever the text holds comes out escaped.
    return Markup(_markdown.render(text or ""))


@dataclass(frozen=True)
class TypePart:
    text: str
    schema: str | None = None  # a schema name, shown as a link to it


@dataclass(frozen=True)
class Field:
    name: str
    type: list[TypePart]
    required: bool
    description: Markup
    where: str = ""  # path or query, for parameters


@dataclass(frozen=True)
class Response:
    status: str
    description: str
    type: list[TypePart]
    example: list[Line] | None


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    anchor: str
    summary: str
    description: Markup
    auth: str
    parameters: list[Field]
    body_type: str | None
    body_schema: list[TypePart]
    body_example: list[Line] | None
    responses: list[Response]


@dataclass
class Section:
    name: str
    description: str
    anchor: str
    operations: list[Operation] = field(default_factory=list)


@dataclass(frozen=True)
class Variant:
    """One shape a schema may take (a rule condition, by its field)."""

    title: str
    description: Markup
    operators: str


@dataclass(frozen=True)
class Schema:
    name: str
    description: Markup
    type: list[TypePart]
    fields: list[Field]
    values: list[str]  # an enumeration's values
    variants: list[Variant]


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    """A `#/components/...` reference, followed; anything else as it is."""
    pointer = node.get("$ref", "")
    if not pointer.startswith("#/"):
        return node
    target: Any = DOCUMENT
    for part in pointer[2:].split("/"):
        target = target[part]
    return target


def type_parts(schema: dict[str, Any] | None) -> list[TypePart]:
    """A schema in a few words: `Segment`, `array of Rule`, `integer or null`."""
    if not schema:
        return [TypePart("any JSON")]
    if "$ref" in schema:
        return [TypePart(schema["$ref"].rsplit("/", 1)[-1], schema["$ref"].rsplit("/", 1)[-1])]
    if "const" in schema:
        return [TypePart(json.dumps(schema["const"]))]
    for combiner in ("oneOf", "anyOf"):
        if combiner in schema and "type" not in schema:
            parts: list[TypePart] = []
            for index, option in enumerate(schema[combiner]):
                parts += ([TypePart(" or ")] if index else []) + type_parts(option)
            return parts
    kinds = schema.get("type", "any JSON")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    parts = []
    for index, kind in enumerate(kinds):
        if index:
            parts.append(TypePart(" or "))
        if kind == "array":
            parts += [TypePart("array of ")] + type_parts(schema.get("items"))
        else:
            parts.append(TypePart(kind + (f" ({schema['format']})" if "format" in schema else "")))
    return parts


def _describe(schema: dict[str, Any]) -> str:
    """The schema's description and its limits, in words."""
    notes = [schema.get("description", "")]
    enum = [v for v in schema.get("enum", ()) if v is not None]
    if enum:
        notes.append("One of " + ", ".join(f"`{v}`" for v in enum) + ".")
    limits = [(key, word) for key, word in (("minimum", "at least"), ("maximum", "at most"),
                                             ("maxLength", "characters at most"),
                                             ("default", "default")) if key in schema]
    if schema.get("maximum") == MAX_DATABASE_ID:  # an id: its range says nothing to a reader
        limits = [(key, word) for key, word in limits if key not in ("minimum", "maximum")]
    for key, word in limits:
        if key == "maxLength":
            notes.append(f"At most {schema[key]:,} characters.")
        else:
            notes.append(f"{word.capitalize()} {schema[key]}.")
    return " ".join(n for n in notes if n)


def pretty(value: Any, level: int = 0) -> str:
    """JSON indented only where a line would be long: a rule condition stays on one line."""
    flat = json.dumps(value, ensure_ascii=False)
    if not isinstance(value, dict | list) or not value or len(flat) + 2 * level <= EXAMPLE_WIDTH:
        return flat
    inner, outer = "  " * (level + 1), "  " * level
    if isinstance(value, dict):
        lines = [f"{inner}{json.dumps(k)}: {pretty(v, level + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(lines) + "\n" + outer + "}"
    return "[\n" + ",\n".join(inner + pretty(v, level + 1) for v in value) + "\n" + outer + "]"


@dataclass(frozen=True)
class Line:
    """One line of an example: its indentation level (drawn by CSS, so a line too long for a
    phone wraps under itself rather than at the left edge) and its text."""

    level: int
    text: str


def _example(value: Any) -> list[Line] | None:
    if value is None:
        return None
    lines = pretty(value).splitlines()
    return [Line(min((len(line) - len(line.lstrip(" "))) // 2, MAX_LEVEL), line.lstrip(" "))
            for line in lines]


def _operation(path: str, method: str, op: dict[str, Any]) -> Operation:
    parameters = [Field(p["name"], type_parts(p.get("schema")), p.get("required", False),
                        markdown(_describe({**p.get("schema", {}),
                                            "description": p.get("description", "")})),
                        p["in"]) for p in op.get("parameters", ())]
    body_type, body_schema, body_example = None, [], None
    if "requestBody" in op:
        body_type, media = next(iter(op["requestBody"]["content"].items()))
        body_schema = type_parts(media.get("schema"))
        body_example = _example(media.get("example"))
    responses = []
    for status, raw in op["responses"].items():
        response = _resolve(raw)
        content: dict[str, Any] = response.get("content", {})
        answer: dict[str, Any] = next(iter(content.values()), {})
        responses.append(Response(status, response["description"],
                                  type_parts(answer["schema"]) if answer else [],
                                  _example(answer.get("example"))))
    if op.get("security") == []:
        auth = "No token needed."
    elif method == "get":
        auth = "Any token."
    else:
        auth = "A full token (a read-only one gets 403)."
    return Operation(method.upper(), path, f"op-{op['operationId']}", op["summary"],
                     markdown(op.get("description")), auth, parameters, body_type, body_schema,
                     body_example, responses)


def sections() -> list[Section]:
    by_tag = {tag["name"]: Section(tag["name"], tag["description"], f"tag-{tag['name'].lower()}")
              for tag in DOCUMENT["tags"]}
    for path, item in DOCUMENT["paths"].items():
        for method in METHODS:
            if method in item:
                op = item[method]
                by_tag[op["tags"][0]].operations.append(_operation(path, method, op))
    return [section for section in by_tag.values() if section.operations]


def schemas() -> list[Schema]:
    found = []
    for name, schema in DOCUMENT["components"]["schemas"].items():
        required = set(schema.get("required", ()))
        fields = [Field(prop, type_parts(sub), prop in required, markdown(_describe(sub)))
                  for prop, sub in schema.get("properties", {}).items()]
        variants = [Variant(v["title"], markdown(v.get("description")),
                            ", ".join(v["properties"]["op"]["enum"]))
                    for v in schema.get("oneOf", ()) if "title" in v]
        found.append(Schema(name, markdown(schema.get("description")),
                            type_parts(schema) if not fields else [TypePart("object")], fields,
                            [str(v) for v in schema.get("enum", ()) if v is not None], variants))
    return found


def info() -> dict[str, Any]:
    return {"title": DOCUMENT["info"]["title"], "version": DOCUMENT["info"]["version"],
            "description": markdown(DOCUMENT["info"]["description"])}
