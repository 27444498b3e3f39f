"""What a request can be billed, bounded before it is sent: its prompt and its reply.

A budget reserves a call's *worst case*, so these are bounds the provider's bill cannot
exceed, not estimates:

- **The prompt** is bounded by the UTF-8 length in bytes of everything the call sends that
  a provider bills as input: every message (keys and values), `tools` and `functions`
  schemas, `tool_choice`, the JSON schema LiteLLM derives from `response_format` (a pydantic
  class is counted as the schema LiteLLM sends, not as its name), and `prediction`. The
  tokenizers of the providers this package routes to (byte-level BPE at OpenAI and Meta,
  Anthropic's, SentencePiece with byte fallback at Google and Mistral) never produce more
  tokens than the text has bytes. Each message adds 8 tokens of chat formatting (OpenAI
  documents 3-4), tools add 1,024 (Anthropic adds a tool-use system prompt of about 350),
  and each image part adds `image_tokens` (50,000 by default: providers resize an image
  before billing it, and a 2048x2048 image costs gpt-4o-mini about 37,000). Inline audio
  (`input_audio`) counts by its base64 bytes: at the 8 kbit/s floor of mp3, 1,333 bytes a
  second against OpenAI's 25 audio tokens a second, which covers audio rates up to 50x the
  text rate. A file or document part, or a video, has no bound this package can compute
  (its pages or seconds are billed, not its bytes): such a prompt is *unbounded*.
- **The reply** is bounded per choice by the call's reply caps (`max_tokens`,
  `max_completion_tokens`, and any cap its `extra_body` carries: the *largest* of them,
  since LiteLLM sends `max_tokens` to Anthropic and Mistral while vLLM and SGLang read
  `max_completion_tokens` first), else by the route's default caps, its declared
  `output_limit`, or LiteLLM's `max_output_tokens` for the model; times `n` (the largest of
  the call's, its `extra_body`'s and the route's: every choice is billed), plus `prediction`
  again, since OpenAI bills rejected prediction tokens as output beyond `max_tokens`.
  Without any of these the reply is *unbounded*. The checkpoint at the wire holds the
  reservation to the body LiteLLM really builds (`policies.sent_body`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .billed import CAP_KEYS, CHOICE_KEYS, FREE, TOOL_FIELDS, unbounded_by

__all__ = [
    "IMAGE_TOKENS",
    "PER_MESSAGE_TOKENS",
    "TOOLS_TOKENS",
    "RequestFacts",
    "prompt_bound",
    "reply_bound",
    "reply_tokens",
    "batch_size",
    "choice_count",
    "unbounded_reason",
    "utf8_bytes",
]

PER_MESSAGE_TOKENS = 8
TOOLS_TOKENS = 1024
IMAGE_TOKENS = 50_000

_IMAGE_PARTS = frozenset({"image_url", "input_image", "image"})
# Billed by pages or seconds, not by the bytes sent: no bound is possible here.
_UNBOUNDED_PARTS = frozenset(
    {"file", "input_file", "document", "video_url", "input_video", "video", "audio_url"}
)


@dataclass(kw_only=True, frozen=True, slots=True)
class RequestFacts:
    """What money decisions need to know about a request, measured once per request.

    `prompt_tokens` is LiteLLM's token count (it orders routes by price); `prompt_bound`
    bounds what any provider can bill as input (None: no bound); `reply_tokens` is the
    per-choice cap the call itself sets (None: it sets none); `choices` is `n` when the
    call sets it; `reply_extra` is output billed beyond the per-choice cap (`prediction`).
    """

    prompt_tokens: int
    prompt_bound: int | None
    reply_tokens: int | None
    choices: int | None = None
    reply_extra: int = 0
    batch: int = 1
    """Prompts in one call (a text completion's list of prompts): each gets its replies."""
    unbounded: str = ""
    """Why the prompt has no bound, naming the field (when `prompt_bound` is None)."""
    generates: bool = True
    """Whether the endpoint bills a reply at all (an embedding bills its input alone)."""


def reply_bound(
    facts: RequestFacts, limit: int | None, choices: int = 1, sent_cap: int | None = None
) -> int | None:
    """The most reply tokens a route can bill for the request, or None when unbounded.

    `limit` is the route's own per-choice cap when the call sets none (its default
    `max_tokens`, declared `output_limit`, or LiteLLM's `max_output_tokens`); `choices`
    is the route's default `n`; `sent_cap` the route's default caps, which go out beside
    the call's when it sets others (a route's `max_completion_tokens` beside a call's
    `max_tokens`: the larger may be read).
    """
    per = facts.reply_tokens if facts.reply_tokens is not None else limit
    if per is not None and facts.reply_tokens is not None and sent_cap is not None:
        per = max(per, sent_cap)
    if per is None:
        return None
    return max(facts.choices or 1, choices) * facts.batch * per + facts.reply_extra


def counted_tokens(facts: RequestFacts, sent_cap: int | None, choices: int = 1) -> int:
    """The tokens a provider counts against its tokens-per-minute limit when the request
    arrives: the prompt's bound plus the reply cap the request sends (`max_tokens` for each
    of `n` choices, the call's or else the route's default `sent_cap`), and `prediction`.

    The model's own output maximum is not counted, as no provider counts it: a request
    that sets no cap takes its prompt alone, and the window learns the rest when its slot
    settles to the provider's usage.
    """
    per = facts.reply_tokens if facts.reply_tokens is not None else sent_cap
    reply = (facts.choices or choices) * facts.batch * per if per is not None else 0
    return (facts.prompt_bound or facts.prompt_tokens) + reply + facts.reply_extra


def reply_tokens(kwargs: Mapping[str, Any], *names: str) -> int | None:
    """The largest whole-number cap among `kwargs[name]` for `names`, and among the caps
    the call's `extra_body` carries (under any provider's name, `billed.CAP_KEYS`), or
    None. The largest, because a provider may read any one of them."""
    caps = [v for n in names if isinstance(v := kwargs.get(n), int) and not isinstance(v, bool)]
    extra = kwargs.get("extra_body")
    if isinstance(extra, Mapping):
        caps += [v for k, v in extra.items() if k in CAP_KEYS and isinstance(v, int) and not isinstance(v, bool)]
    return max(caps) if caps else None


def choice_count(kwargs: Mapping[str, Any], *names: str) -> int | None:
    """The largest count of replies among `kwargs[name]` for `names` and the call's
    `extra_body` (`n`, `best_of`, `candidate_count`, ...), or None when it sets none."""
    found = [v for n in names if isinstance(v := kwargs.get(n), int) and not isinstance(v, bool)]
    extra = kwargs.get("extra_body")
    if isinstance(extra, Mapping):
        found += [v for k, v in extra.items() if k in CHOICE_KEYS and isinstance(v, int) and not isinstance(v, bool)]
    return max(found) if found else None


def utf8_bytes(value: Any) -> int:
    """The UTF-8 bytes of every key and string in `value`, numbers and None as their text."""
    return _bytes(value)


def _bytes(value: Any) -> int:
    if isinstance(value, str):
        # A lone surrogate cannot be sent at all; it is refused before this is reached.
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, Mapping):
        return sum(_bytes(k) + _bytes(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return sum(_bytes(v) for v in value)
    if value is None or isinstance(value, bool | int | float):
        return len(str(value))
    dump = getattr(value, "model_dump", None)
    return _bytes(dump() if callable(dump) else str(value))


def _parts(content: Any) -> tuple[int, bool]:
    """Image parts in a message's content, nested tool results included, and whether a
    part without a bound (a file, a video) is among them."""
    if not isinstance(content, list | tuple):
        return 0, False
    images, unbounded = 0, False
    for part in content:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in _IMAGE_PARTS or (kind is None and "image_url" in part):
            images += 1
        elif kind in _UNBOUNDED_PARTS:
            unbounded = True
        inner_images, inner_unbounded = _parts(part.get("content"))
        images += inner_images
        unbounded = unbounded or inner_unbounded
    return images, unbounded


SchemaOf = Callable[[type], Any]
"""What LiteLLM sends for a `response_format` class (the drivers pass LiteLLM's own)."""


@lru_cache(maxsize=128)
def _schema_bytes(response_format: type, schema_of: SchemaOf | None) -> int:
    # The schema derived from a pydantic class is the same on every call.
    if schema_of is not None:
        return _bytes(json.dumps(schema_of(response_format)))
    # Without LiteLLM's derivation at hand: pydantic's own schema, doubled, bounds what
    # LiteLLM sends (it wraps the schema and adds at most `"additionalProperties": false`
    # to each object, never as much again as the object itself).
    schema = getattr(response_format, "model_json_schema", None)
    return 2 * _bytes(json.dumps(schema() if callable(schema) else str(response_format))) + 256


def _value_bytes(value: Any, schema_of: SchemaOf | None) -> int:
    # A class (a pydantic `response_format` or `text_format`) is sent as its schema.
    if isinstance(value, type):
        return _schema_bytes(value, schema_of)
    return _bytes(value)


def prompt_bound(
    kwargs: Mapping[str, Any],
    image_tokens: int = IMAGE_TOKENS,
    *,
    texts: Sequence[str] = ("messages",),
    schema_of: SchemaOf | None = None,
) -> int | None:
    """An upper bound on the prompt tokens any provider can bill for this call, or None
    when the call carries a part that has none (see the module docstring).

    `texts` names the keyword arguments that carry the prompt itself (`messages` for chat;
    `input`, `instructions` or `prompt` for the other endpoints); each counts as messages do.
    """
    if unbounded_by(kwargs, texts) is not None:
        return None
    bound = PER_MESSAGE_TOKENS
    images = 0
    for name in texts:
        value = kwargs.get(name)
        items = value if isinstance(value, list | tuple) else ([] if value is None else [value])
        for item in items:
            if not isinstance(item, Mapping):
                content = item  # a text of `input` or `prompt`, or a list of token ids
            elif (
                isinstance(content := item.get("content"), str)
                and len(item) == 2
                and isinstance(item.get("role"), str)
            ):
                # The common message, {"role": ..., "content": "text"}, counted directly.
                bound += len(content.encode("utf-8", "surrogatepass")) + len(item["role"]) + 11
                bound += PER_MESSAGE_TOKENS
                continue
            bound += _bytes(item) + PER_MESSAGE_TOKENS
            found, unbounded = _parts(content)
            if unbounded:
                return None
            images += found
    tools = False
    for name, value in kwargs.items():
        # Every other field is billed input unless it is known to be free (`billed.FREE`).
        if name in texts or name in FREE or value is None:
            continue
        tools = tools or (name in TOOL_FIELDS and bool(value))
        bound += _value_bytes(value, schema_of)
    if tools:
        bound += TOOLS_TOKENS
    return bound + images * image_tokens


def unbounded_reason(kwargs: Mapping[str, Any], texts: Sequence[str] = ("messages",)) -> str:
    """Why `prompt_bound` finds no bound for the call, naming the field ("" when it has one)."""
    why = unbounded_by(kwargs, texts)
    if why is not None:
        return why
    for name in texts:
        value = kwargs.get(name)
        items = value if isinstance(value, list | tuple) else [value]
        for item in items:
            if isinstance(item, Mapping) and _parts(item.get("content"))[1]:
                return f"{name}: a file or video part is billed by pages or seconds, not bytes"
    return ""


def batch_size(kwargs: Mapping[str, Any], name: str | None) -> int:
    """How many prompts the call's `name` field holds: a list of texts or of token-id lists
    is a batch, each prompt answered (and billed) on its own; anything else is one."""
    value = kwargs.get(name) if name else None
    if isinstance(value, list | tuple) and value and not all(isinstance(v, int) for v in value):
        return len(value)
    return 1


def prediction_tokens(kwargs: Mapping[str, Any]) -> int:
    """Output tokens a `prediction` can add beyond the reply cap (its bytes), else 0."""
    prediction = kwargs.get("prediction")
    return _bytes(prediction) if prediction is not None else 0
