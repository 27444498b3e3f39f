"""How FakeProvider bills a request when its step gives no usage: one token a word.

It bills everything a real provider bills, so a budget's bound is tested against an honest
bill: the words of every message's text, the words of the JSON of `tools`, `functions`,
`tool_choice`, `response_format` (as sent: LiteLLM has already turned a pydantic class into
its schema) and `prediction`, `IMAGE_TOKENS` per image part, and for the reply the words it
sends for each of `n` choices, cut at `max_tokens`/`max_completion_tokens` and at the model's
own output limit (`FakeProvider.limits`). A word is at least one byte, so a bound that holds
for bytes holds here; a bound that forgets a part of the request does not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["IMAGE_TOKENS", "cap", "choices", "prompt_tokens", "words"]

IMAGE_TOKENS = 765
"""What OpenAI bills gpt-4o for a 1024x1024 image in high detail."""

_BILLED_AS_JSON = ("tools", "functions", "tool_choice", "response_format", "prediction")


def words(text: str) -> int:
    return len(text.split())


def _text_and_images(content: Any) -> tuple[int, int]:
    if isinstance(content, str):
        return words(content), 0
    if not isinstance(content, list):
        return (words(json.dumps(content)) if content is not None else 0), 0
    tokens = images = 0
    for part in content:
        if isinstance(part, str):
            tokens += words(part)
        elif isinstance(part, Mapping):
            if part.get("type") in ("image_url", "input_image", "image"):
                images += 1
            elif isinstance(part.get("text"), str):
                tokens += words(part["text"])
            elif part.get("type") == "input_audio":
                tokens += words(json.dumps(part))
            inner, inner_images = _text_and_images(part.get("content"))
            tokens, images = tokens + inner, images + inner_images
    return tokens, images


def prompt_tokens(body: Mapping[str, Any], texts: tuple[str, ...] = ("messages",)) -> int:
    """The prompt tokens billed for a request body (at least 1)."""
    tokens = images = 0
    for name in texts:
        value = body.get(name)
        items = value if isinstance(value, list) else ([] if value is None else [value])
        for item in items:
            content = item.get("content") if isinstance(item, Mapping) else item
            found, found_images = _text_and_images(content)
            tokens, images = tokens + found, images + found_images
    for name in _BILLED_AS_JSON:
        if body.get(name) is not None:
            tokens += words(json.dumps(body[name]))
    return max(tokens + images * IMAGE_TOKENS, 1)


def cap(body: Mapping[str, Any], limit: int | None, *names: str) -> int | None:
    """The most reply tokens per choice: the smallest of the body's caps and the model's."""
    caps = [v for n in names if isinstance(v := body.get(n), int) and not isinstance(v, bool)]
    if limit is not None:
        caps.append(limit)
    return min(caps) if caps else None


def stop_at(text: str, tokens: int, finish: str, limit: int | None) -> tuple[str, int, str]:
    """A reply as written under a cap of `limit` tokens: cut to it, finishing "length",
    as a model stops at its limit; never under one token."""
    if limit is not None and tokens > limit:
        text, tokens, finish = " ".join(text.split()[:limit]), limit, "length"
    return text, max(tokens, 1), finish


def choices(body: Mapping[str, Any]) -> int:
    """How many replies a request bills: `n`, or `best_of` when larger (a completion
    generates `best_of` and shows `n`)."""
    counts = [
        v
        for name in ("n", "best_of")
        if isinstance(v := body.get(name), int) and not isinstance(v, bool) and v > 0
    ]
    return max(counts, default=1)
