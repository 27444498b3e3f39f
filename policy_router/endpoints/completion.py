"""Text completions: `litellm.text_completion` / `atext_completion`, `prompt` in.

Measured with litellm 1.110.2: LiteLLM's text-completion stream wrapper hides a stream cut
short (it ends it with a made-up `finish_reason="stop"` and an estimated usage), so such a
cut cannot be told from a clean end here; chat streams are watched more closely.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.validate import check_texts
from ..ground.errors import ConfigError
from ..policies.requirements import Requirements
from .base import Endpoint, Piece, StreamShape
from .reading import no_choices, usage_of

__all__ = ["COMPLETION"]


def _read(chunk: Any) -> Piece:
    text: list[str] = []
    finish = None
    for choice in getattr(chunk, "choices", None) or ():
        piece = getattr(choice, "text", None)
        if piece:
            text.append(piece)
        finish = getattr(choice, "finish_reason", None) or finish
    joined = "".join(text)
    return Piece(text=joined, finish=finish, usage=usage_of(chunk), carries=bool(joined or finish))


def _prompt_shape(value: Any, depth: int = 0) -> bool:
    # What LiteLLM's own type allows (`str | list[str | list[str | list[int]]]`) and what
    # OpenAI's API takes besides: token ids, and batches of token-id lists.
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return depth > 0 or isinstance(value, str)
    if isinstance(value, list | tuple) and depth < 3:
        return bool(value) and all(_prompt_shape(v, depth + 1) for v in value)
    return False


def _check(kwargs: Mapping[str, Any]) -> None:
    prompt = kwargs.get("prompt")
    if not _prompt_shape(prompt):
        raise ConfigError(
            "prompt must be a string, a non-empty list of strings, token ids (a list of "
            f"ints) or a batch of token-id lists, got {type(prompt).__name__}"
        )
    check_texts(kwargs, ("prompt",))


def _requirements(kwargs: Mapping[str, Any]) -> Requirements:
    return Requirements(endpoint="completion", streaming=bool(kwargs.get("stream")))


COMPLETION = Endpoint(
    name="completion",
    function="text_completion",
    afunction="atext_completion",
    prompt=("prompt",),
    reply_caps=("max_tokens",),
    choices=("n", "best_of"),
    generates=True,
    check=_check,
    requirements=_requirements,
    usage=usage_of,
    stream=StreamShape(
        read=_read,
        hollow=lambda _chunk: False,
        ask_usage=True,
        unchecked_end=(
            "a text-completion stream cut short cannot be told from a clean end (LiteLLM's "
            "text-completion stream wrapper ends a cut stream with finish_reason 'stop' and "
            "an estimated usage): its text may be incomplete with nothing raised; use "
            "router.completion (chat) where a cut must be caught"
        ),
    ),
    batch="prompt",
    empty=no_choices,
)
