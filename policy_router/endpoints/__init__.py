"""Endpoints: the kinds of call a request can be, each described once, as data.

Chat, embeddings, the Responses API and text completions differ in which LiteLLM function
answers them, which keyword arguments carry the prompt and cap the reply, how their usage
and their streams read, and what they require of a route. Each is one frozen `Endpoint`
value in its own module here; the plan, the drivers and the streams take it and never
branch on which it is (STYLE habit 14). Adding image generation, transcription or rerank
is one more module: its LiteLLM functions, its prompt keyword, how its bill reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..ground.money import Usage
from ..policies.requirements import Requirements

__all__ = ["ENDPOINTS", "Endpoint", "Piece", "StreamShape", "endpoint"]


@dataclass(frozen=True, slots=True)
class Piece:
    """What one streamed chunk or event says: its text, the finish reason it gives (the
    answer ended), the usage it carries, and whether it carries anything for the caller."""

    text: str = ""
    finish: str | None = None
    usage: Usage | None = None
    carries: bool = True


@dataclass(frozen=True, slots=True)
class StreamShape:
    """How an endpoint's stream reads.

    `read` turns a chunk into a `Piece`; `hollow` says whether a first chunk is one LiteLLM
    made up for a connection that closed before any data; `ask_usage` whether the router
    asks for `stream_options={"include_usage": True}` (and hides that chunk when the
    caller did not ask for it).
    """

    read: Callable[[Any], Piece]
    hollow: Callable[[Any], bool]
    ask_usage: bool


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One kind of call (see the module docstring).

    - `name` is also the capability a route needs to serve it (`Capability(name)`);
    - `function` / `afunction` are LiteLLM's functions for it;
    - `prompt` names the keyword arguments that carry the prompt, `reply_caps` those that
      cap one reply, `choices` those that multiply the replies billed; `generates` is False
      when nothing but the input is billed (embeddings);
    - `check` refuses a malformed prompt (the rest of the call is checked alike for every
      endpoint, by `validate.check_call`), `requirements` reads what the call needs;
    - `usage` reads what a response (or a stream's final event) billed;
    - `stream` says how its stream reads, or None when it does not stream.
    """

    name: str
    function: str
    afunction: str
    prompt: tuple[str, ...]
    reply_caps: tuple[str, ...]
    choices: tuple[str, ...]
    generates: bool
    check: Callable[[Mapping[str, Any]], None]
    requirements: Callable[[Mapping[str, Any]], Requirements]
    usage: Callable[[Any], Usage | None]
    stream: StreamShape | None


def endpoint(name: str) -> Endpoint:
    """The endpoint called `name`, or a ConfigError listing them."""
    found = ENDPOINTS.get(name)
    if found is None:
        from ..ground.errors import ConfigError

        raise ConfigError(
            f"endpoint={name!r} is not an endpoint; use one of: {', '.join(ENDPOINTS)}"
        )
    return found


def _registry() -> dict[str, Endpoint]:
    from .chat import CHAT
    from .completion import COMPLETION
    from .embedding import EMBEDDING
    from .responses import RESPONSES

    return {e.name: e for e in (CHAT, EMBEDDING, RESPONSES, COMPLETION)}


ENDPOINTS: Mapping[str, Endpoint] = _registry()
