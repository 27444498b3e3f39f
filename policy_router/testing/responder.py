"""`Cooperative`: a responder that answers tool and schema requests as a willing model would.

FakeProvider answers with its scripts, then with its default reply. Given a responder, it
asks it first once the script is empty: `Cooperative()` reads the request, not its meaning,
and answers deterministically:

- asked by a user with tools bound (and `tool_choice` not "none"), it calls the tool the
  choice names, else one the prompt names, else the first, with arguments made from the
  tool's JSON schema: a string is the prompt's first quoted phrase (else "example"), an
  integer the number the prompt gives as `name(3)` (else 1), ...;
- after a tool's result it answers in text;
- with a `response_format` JSON schema, it answers with a JSON instance of the schema.

It is what lets LangChain's standard integration suite drive tool calling and structured
output through the router without a real model; it is no judge of what a prompt asks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .steps import Reply, Step

__all__ = ["Cooperative", "instance"]


def instance(
    schema: Mapping[str, Any],
    number: int = 1,
    text: str = "example",
    defs: Mapping[str, Any] | None = None,
) -> Any:
    """A value that fits `schema` (a JSON schema), made deterministically from `number`
    and `text`."""
    defs = defs if defs is not None else schema.get("$defs") or schema.get("definitions") or {}

    def fit(inner: Mapping[str, Any]) -> Any:
        return instance(inner, number, text, defs)

    if "$ref" in schema:
        return fit(defs.get(str(schema["$ref"]).rsplit("/", 1)[-1], {}))
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(key) or [] if o.get("type") != "null"]
        if options:
            return fit(options[0])
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or "properties" in schema:
        return {k: fit(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [fit(schema.get("items") or {"type": "string"})]
    if kind == "integer":
        return number
    if kind == "number":
        return float(number)
    if kind == "boolean":
        return True
    return text


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content or "")


class Cooperative:
    """A FakeProvider responder (see the module docstring). Chat completions only."""

    def __call__(self, path: str, body: Mapping[str, Any]) -> Step | None:
        if not path.endswith("/chat/completions"):
            return None
        messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
        last = messages[-1] if messages else {}
        tools = {
            t["function"]["name"]: t["function"]
            for t in body.get("tools") or []
            if isinstance(t, Mapping) and isinstance(t.get("function"), Mapping)
        }
        if tools and last.get("role") == "user":
            prompt = _text(last)
            name = self._tool_to_call(body.get("tool_choice"), tools, prompt)
            if name is not None:
                number = re.search(rf"{re.escape(name)}\((\d+)\)", prompt)
                quoted = re.search(r"'([^']+)'|\"([^\"]+)\"", prompt)
                args = instance(
                    tools[name].get("parameters") or {},
                    int(number[1]) if number else 1,
                    (quoted[1] or quoted[2]) if quoted else "example",
                )
                return Reply(tool_calls=[{"name": name, "arguments": args}])
        schema = self._schema(body.get("response_format"))
        if schema is not None:
            return Reply(json.dumps(instance(schema)))
        return None

    def _tool_to_call(self, choice: Any, tools: Mapping[str, Any], prompt: str) -> str | None:
        if choice == "none":
            return None
        if isinstance(choice, Mapping):
            named = (choice.get("function") or {}).get("name")
            return str(named) if named in tools else None
        mentioned = [n for n in tools if n in prompt]
        return max(mentioned, key=len) if mentioned else next(iter(tools))

    def _schema(self, response_format: Any) -> Mapping[str, Any] | None:
        if not isinstance(response_format, Mapping):
            return None
        if response_format.get("type") == "json_schema":
            spec = response_format.get("json_schema") or {}
            return spec.get("schema") if isinstance(spec, Mapping) else None
        if response_format.get("type") == "json_object":
            return {
                "type": "object",
                "properties": {"setup": {"type": "string"}, "punchline": {"type": "string"}},
            }
        return None
