"""Anthropic's Messages API: `litellm.anthropic_messages`, `messages` (and `system`) in.

LiteLLM takes a Messages request for any provider it reaches (natively for Anthropic's
own, through its chat or Responses bridge for the others) and answers in Anthropic's shape:
a dict (`{"type": "message", "content": [...], "usage": {"input_tokens", "output_tokens"}}`)
or, streamed, server-sent events as bytes (`message_start`, `content_block_delta`,
`message_delta` with the stop reason and usage, `message_stop`). So a route that serves
chat serves Messages: the call requires `chat` of it. LiteLLM's Messages function is async
only, as is LiteLLM Router's; so is the router's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..core.validate import check_texts
from ..ground.errors import ConfigError
from ..ground.money import Usage
from ..policies.requirements import Requirements
from .base import Endpoint, Piece, StreamShape

__all__ = ["MESSAGES", "usage_of"]


def usage_of(found: Any) -> Usage | None:
    """Anthropic's usage (`input_tokens` without the cached ones, `output_tokens`, the
    cache's reads and writes) as a `Usage` counting the whole prompt."""
    if not isinstance(found, Mapping):
        return None
    given = found.get("input_tokens")
    output = found.get("output_tokens")
    if not isinstance(given, int) or not isinstance(output, int):
        return None
    read = int(found.get("cache_read_input_tokens") or 0)
    written = int(found.get("cache_creation_input_tokens") or 0)
    prompt = given + read + written
    if prompt <= 0:
        return None  # a usage that counts no prompt token measures nothing
    return Usage(prompt=prompt, completion=output, cache_read=read, cache_write=written)


def _usage(response: Any) -> Usage | None:
    return usage_of(response.get("usage") if isinstance(response, Mapping) else getattr(response, "usage", None))


def _events(chunk: Any) -> list[dict[str, Any]]:
    """The events a streamed chunk carries (LiteLLM yields each as its SSE bytes)."""
    if isinstance(chunk, Mapping):
        return [dict(chunk)]
    text = chunk.decode("utf-8", "replace") if isinstance(chunk, bytes | bytearray) else str(chunk)
    found = []
    for block in text.split("\n\n"):
        data = [line[5:].strip() for line in block.splitlines() if line.startswith("data:")]
        if data:
            try:
                event = json.loads("".join(data))
            except ValueError:
                continue
            if isinstance(event, dict):
                found.append(event)
    return found


def _read(chunk: Any) -> Piece:
    text, finish, usage = "", None, None
    for event in _events(chunk):
        kind = event.get("type")
        if kind == "content_block_delta":
            delta = event.get("delta") or {}
            text += str(delta.get("text") or delta.get("thinking") or delta.get("partial_json") or "")
        elif kind == "message_delta":
            finish = str((event.get("delta") or {}).get("stop_reason") or "end_turn")
            usage = usage_of(event.get("usage")) or usage
        elif kind == "error":
            finish = None
    return Piece(text=text, finish=finish, usage=usage)


def _blocks(messages: Any) -> list[Any]:
    items = messages if isinstance(messages, list) else []
    return [
        b for m in items if isinstance(m, Mapping) and isinstance(m.get("content"), list)
        for b in m["content"]
    ]


def _check(kwargs: Mapping[str, Any]) -> None:
    messages = kwargs.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ConfigError(
            f"messages must be a non-empty list of {{'role': ..., 'content': ...}}, got {type(messages).__name__}"
        )
    cap = kwargs.get("max_tokens")
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ConfigError(f"max_tokens is required by the Messages API: a whole number >= 1, got {cap!r}")
    check_texts(kwargs, ("messages", "system"))


def _requirements(kwargs: Mapping[str, Any]) -> Requirements:
    blocks = _blocks(kwargs.get("messages"))
    return Requirements(
        endpoint="chat",
        tools=bool(kwargs.get("tools")),
        images=any(isinstance(b, Mapping) and b.get("type") in ("image", "document") for b in blocks),
        thinking=isinstance(kwargs.get("thinking"), Mapping) and kwargs["thinking"].get("type") == "enabled",
        streaming=bool(kwargs.get("stream")),
    )


MESSAGES = Endpoint(
    name="messages",
    function="anthropic_messages",
    afunction="anthropic_messages",
    prompt=("messages", "system"),
    reply_caps=("max_tokens",),
    choices=(),
    generates=True,
    check=_check,
    requirements=_requirements,
    usage=_usage,
    stream=StreamShape(read=_read, hollow=lambda _chunk: False, ask_usage=False),
)
