"""Endpoints: the kinds of call a request can be, each described once, as data.

Chat, embeddings, the Responses API and text completions differ in which LiteLLM function
answers them, which keyword arguments carry the prompt and cap the reply, how their usage
and their streams read, and what they require of a route. Each is one frozen `Endpoint`
value in its own module here; the plan, the drivers and the streams take it and never
branch on which it is (STYLE habit 14). Adding image generation, transcription or rerank
is one more module: its LiteLLM functions, its prompt keyword, how its bill reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..ground.errors import ConfigError
from .base import Endpoint, Piece, StreamShape
from .chat import CHAT
from .completion import COMPLETION
from .embedding import EMBEDDING
from .messages import MESSAGES
from .responses import RESPONSES

__all__ = ["ENDPOINTS", "Endpoint", "Piece", "StreamShape", "endpoint", "with_messages"]


def endpoint(name: str) -> Endpoint:
    """The endpoint called `name`, or a ConfigError listing them."""
    found = ENDPOINTS.get(name)
    if found is None:
        raise ConfigError(
            f"endpoint={name!r} is not an endpoint; use one of: {', '.join(ENDPOINTS)}"
        )
    return found


ENDPOINTS: Mapping[str, Endpoint] = {e.name: e for e in (CHAT, EMBEDDING, RESPONSES, COMPLETION, MESSAGES)}


def with_messages(endpoint: Endpoint, messages: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The call's keyword arguments with the positional `messages` among them, for the
    endpoints that take messages (chat, Anthropic's Messages API); a `messages=` given to
    another endpoint is refused, naming the keyword it takes."""
    if endpoint.prompt[0] == "messages":
        return {**kwargs, "messages": messages} if messages is not None or "messages" not in kwargs else dict(kwargs)
    if messages is not None:
        raise ConfigError(
            f"messages= belongs to chat; a {endpoint.name} call takes {endpoint.prompt[0]}="
        )
    return dict(kwargs)
