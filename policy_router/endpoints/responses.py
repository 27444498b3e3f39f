"""The Responses API: `litellm.responses` / `aresponses`, `input` (and `instructions`) in.

A stream is a sequence of typed events (`response.created`, `response.output_text.delta`,
..., `response.completed`); the answer has ended only at `response.completed` (or
`response.incomplete`, as a chat stream ends on `length`), whose response carries usage.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.validate import check_texts
from ..ground.errors import ConfigError
from ..ground.money import Usage
from ..policies.requirements import Requirements
from .base import Endpoint, Piece, StreamShape

__all__ = ["RESPONSES"]

_ENDS = {"response.completed": "completed", "response.incomplete": "incomplete"}


def usage(response: Any) -> Usage | None:
    """`input_tokens`/`output_tokens` (with cached and reasoning details) as a `Usage`."""
    found = getattr(response, "usage", None)
    prompt = getattr(found, "input_tokens", None)
    completion = getattr(found, "output_tokens", None)
    if not isinstance(prompt, int) or not isinstance(completion, int) or prompt <= 0:
        return None  # a usage that counts no prompt token measures nothing
    cached = getattr(getattr(found, "input_tokens_details", None), "cached_tokens", None)
    reasoning = getattr(getattr(found, "output_tokens_details", None), "reasoning_tokens", None)
    return Usage(prompt=prompt, completion=completion, cache_read=int(cached or 0), cache_write=0, reasoning=int(reasoning or 0))


def _read(event: Any) -> Piece:
    kind = getattr(event, "type", "") or ""
    kind = str(getattr(kind, "value", kind))  # LiteLLM's events carry an Enum type
    if kind == "response.output_text.delta":
        return Piece(text=str(getattr(event, "delta", "") or ""))
    if kind == "response.created":
        made = getattr(getattr(event, "response", None), "id", None)
        return Piece(answer_id=made if isinstance(made, str) else "")
    if kind in _ENDS:
        response = getattr(event, "response", None)
        warning = _why_incomplete(response) if kind == "response.incomplete" else ""
        return Piece(text="", finish=_ENDS[kind], usage=usage(response), warning=warning)
    return Piece()


def _why_incomplete(response: Any) -> str:
    details = getattr(response, "incomplete_details", None)
    reason = getattr(details, "reason", None) or (
        details.get("reason") if isinstance(details, Mapping) else None
    )
    return (
        f"the response ended incomplete ({reason or 'no reason given'}): its text "
        "is what the model wrote before it stopped"
    )


def incomplete(response: Any) -> str:
    """Why a whole (non-streamed) Responses answer is incomplete, its
    `incomplete_details.reason` named; "" when its status is not "incomplete"."""
    return _why_incomplete(response) if getattr(response, "status", None) == "incomplete" else ""


def _parts(value: Any) -> list[Any]:
    items = value if isinstance(value, list) else []
    return [p for item in items if isinstance(item, Mapping) for p in item.get("content") or []]


def _check(kwargs: Mapping[str, Any]) -> None:
    value = kwargs.get("input")
    if not (isinstance(value, str) or (isinstance(value, list) and value)):
        raise ConfigError(
            f"input must be a string or a non-empty list of input items, got {type(value).__name__}"
        )
    check_texts(kwargs, ("input", "instructions"))


def _requirements(kwargs: Mapping[str, Any]) -> Requirements:
    text_format = (
        (kwargs.get("text") or {}).get("format")
        if isinstance(kwargs.get("text"), Mapping)
        else None
    )
    parts = _parts(kwargs.get("input"))
    return Requirements(
        endpoint="responses",
        tools=bool(kwargs.get("tools")),
        images=any(isinstance(p, Mapping) and p.get("type") == "input_image" for p in parts),
        structured_output=isinstance(text_format, Mapping)
        and text_format.get("type") in ("json_schema", "json_object"),
        thinking=bool(kwargs.get("reasoning")),
        streaming=bool(kwargs.get("stream")),
    )


RESPONSES = Endpoint(
    name="responses",
    function="responses",
    afunction="aresponses",
    prompt=("input", "instructions"),
    reply_caps=("max_output_tokens",),
    choices=(),
    generates=True,
    check=_check,
    requirements=_requirements,
    usage=usage,
    stream=StreamShape(read=_read, hollow=lambda _event: False, ask_usage=False, failure_events=True),
    incomplete=incomplete,
)
