"""How FakeProvider bills a request when its step gives no usage: one token a word.

It bills everything it receives but a few control fields, so a budget's bound is tested
against an honest bill: the words of every message's text, the words of the JSON of every
other field (`tools`, `response_format` as sent, `suffix`, Responses' `text`, a field nobody
listed), `IMAGE_TOKENS` per image part, a stored conversation and each built-in tool run, and for the reply the words it
sends for each of `n` choices, cut at `max_tokens`/`max_completion_tokens` and at the model's
own output limit (`FakeProvider.limits`). A word is at least one byte, so a bound that holds
for bytes holds here; a bound that forgets a part of the request does not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["IMAGE_TOKENS", "STATE_TOKENS", "TOOL_RUN_TOKENS", "cap", "choices", "prompt_tokens", "words"]

IMAGE_TOKENS = 765
"""What OpenAI bills gpt-4o for a 1024x1024 image in high detail."""

# What this fake does not bill, as a provider would not: every other field it receives is
# billed as the words of its JSON, so a field the router forgets to bound is caught.
_FREE = frozenset(
    {
        "model", "stream", "stream_options", "max_tokens", "max_completion_tokens",
        "max_output_tokens", "n", "best_of", "temperature", "top_p", "seed", "user",
        "metadata", "store", "stop", "logprobs", "top_logprobs", "encoding_format",
    }
)
STATE_TOKENS = 100_000
"""What a request continuing a stored conversation (`previous_response_id`) is billed for it."""
TOOL_RUN_TOKENS = 20_000
"""What each built-in tool the provider runs (any tool that is not a function) bills."""


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
        elif isinstance(part, int | list):  # token ids, or a batch's token-id list
            inner, _ = _text_and_images(part if isinstance(part, list) else [str(part)])
            tokens += inner
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
    for name, value in body.items():
        if name in texts or name in _FREE or value is None:
            continue
        tokens += words(json.dumps(value, default=str))
        if name in ("previous_response_id", "conversation"):
            tokens += STATE_TOKENS
        if name in ("tools", "functions") and isinstance(value, list):
            tokens += TOOL_RUN_TOKENS * sum(1 for t in value if _runs(t))
    return max(tokens + images * IMAGE_TOKENS, 1)


# A function the caller runs, spelled without a type (OpenAI's flat or bare function,
# Gemini's declarations): billed as its schema. Any other typeless entry is a tool the
# provider runs (Gemini's `{"googleSearch": {}}`), billed by what it reads.
_FUNCTION_KEYS = frozenset({"function", "name", "description", "parameters", "strict",
                            "functionDeclarations", "function_declarations"})


def _runs(tool: Any) -> bool:
    """Whether a tool entry is one the provider runs itself (and bills a run of)."""
    if not isinstance(tool, Mapping):
        return False
    kind = tool.get("type")
    if kind is not None:
        return kind not in ("function", "custom")
    return not set(tool) <= _FUNCTION_KEYS


def cap(body: Mapping[str, Any], limit: int | None, *names: str) -> int | None:
    """The most reply tokens per choice: the *largest* of the body's caps (providers differ
    in which of `max_tokens` and `max_completion_tokens` they read: vLLM the second, the
    OpenAI-compatible rest the first; this fake bills as the one reading the larger), then
    no more than the model's own limit."""
    caps = [v for n in names if isinstance(v := body.get(n), int) and not isinstance(v, bool)]
    if not caps:
        return limit
    return max(caps) if limit is None else min(max(caps), limit)


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
