"""The shape every endpoint is described in: `Endpoint`, and how its streams read.

Each endpoint module (`chat.py`, ...) is one frozen `Endpoint` value built from these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..ground.money import Usage
from ..policies.requirements import Requirements

__all__ = ["Endpoint", "Piece", "StreamShape"]


@dataclass(kw_only=True, frozen=True, slots=True)
class Piece:
    """What one streamed chunk or event says: its text, the finish reason it gives (the
    answer ended), the usage it carries, and whether it carries anything for the caller."""

    text: str = ""
    finish: str | None = None
    usage: Usage | None = None
    carries: bool = True
    answer_id: str = ""
    """The id the provider gave the answer, when the chunk carries it (a Responses event)."""
    warning: str = ""
    """Something the caller should be told once, though the stream goes on or ends well
    (a Responses stream that ended `incomplete`)."""



@dataclass(kw_only=True, frozen=True, slots=True)
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
    failure_events: bool = False
    """Whether the stream's events may say it failed (`response.failed`, `error`): the
    router then keeps such an event for the error it raises."""
    unchecked_end: str = ""
    """Why a cut stream cannot be told from a clean end here ("" when it can): the caller
    is warned once per process, at the first such stream."""
    usage_ends: bool = False
    """Whether a chunk with the usage and no choices, after the finish reason, is the
    stream's last (chat's: OpenAI sends it just before `[DONE]`, and LiteLLM makes it after
    the provider's stream ended): the router then ends the stream there (`Watch.whole`)."""



@dataclass(kw_only=True, frozen=True, slots=True)
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
    batch: str | None = None
    """The keyword that may hold a batch of prompts, each answered and billed on its own."""
    empty: Callable[[Any], bool] | None = None
    """Whether a whole answer says nothing (a 200 with `choices: []`): a provider's fault,
    not an answer. None when the endpoint has no such answer to tell."""
    incomplete: Callable[[Any], str] | None = None
    """Why a whole answer is served incomplete ("" when it is not): the caller is warned
    once, and it is still the answer. None when the endpoint has no such answer."""
