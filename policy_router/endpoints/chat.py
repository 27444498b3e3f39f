"""Chat completions: `litellm.completion` / `acompletion`, `messages` in, choices out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.validate import check_messages
from ..policies.requirements import Requirements
from .base import Endpoint, Piece, StreamShape
from .reading import is_hollow_first_chunk, no_choices, usage_of

__all__ = ["CHAT", "read_chunk"]


def read_chunk(chunk: Any) -> Piece:
    """A `ModelResponseStream` chunk: its content, finish reason, and usage if it ends."""
    text: list[str] = []
    finish = None
    carries = False
    for choice in getattr(chunk, "choices", None) or ():
        delta = getattr(choice, "delta", None)
        content = getattr(delta, "content", None)
        if content:
            text.append(content)
        reason = getattr(choice, "finish_reason", None)
        if reason:
            finish = reason
        carries = carries or bool(
            content or reason or getattr(delta, "tool_calls", None) or getattr(delta, "role", None)
        )
    return Piece(text="".join(text), finish=finish, usage=usage_of(chunk), carries=carries)


def _check(kwargs: Mapping[str, Any]) -> None:
    check_messages(kwargs.get("messages"))


CHAT = Endpoint(
    name="chat",
    function="completion",
    afunction="acompletion",
    prompt=("messages",),
    reply_caps=("max_tokens", "max_completion_tokens"),
    choices=("n",),
    generates=True,
    check=_check,
    requirements=Requirements.from_kwargs,
    usage=usage_of,
    stream=StreamShape(read=read_chunk, hollow=is_hollow_first_chunk, ask_usage=True, usage_ends=True),
    empty=no_choices,
)
