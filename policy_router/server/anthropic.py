"""Anthropic's Messages API on the server: what coding agents and the Anthropic SDK speak.

`POST /v1/messages` (whole, or streamed with Anthropic's own events) and
`POST /v1/messages/count_tokens`, over the same routes and every promise of the OpenAI
paths (the floor, the budgets, the deadline, the breaker, the journey in the headers). The
key comes as Anthropic's `x-api-key` header (or `Authorization: Bearer`); `anthropic-version`
and `anthropic-beta` are accepted as they are. The body is read against the anthropic SDK's
own types (`drive.seam.openai_params`) and handed to the router's `aanthropic_messages`,
which is LiteLLM's own Messages function: no conversion is written here. Errors take
Anthropic's shape, `{"type": "error", "error": {"type", "message"}}`, with the same statuses
and retry advice as the OpenAI paths.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ..core.journey import Routed
from ..drive.seam.openai_params import params
from ..drive.seam.tokens import counter
from ..ground.errors import ConfigError
from ..ground.route import Route
from .answers import error_body, journey_of
from .reading import policy_of

__all__ = ["error_of", "events", "input_tokens", "key_of", "read_messages", "shaped"]

# Anthropic's error types, by status (its API reference's error list).
_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
    500: "api_error", 502: "api_error", 503: "overloaded_error", 504: "api_error", 529: "overloaded_error",
}


def key_of(headers: Mapping[str, str]) -> str | None:
    """The `Authorization` header a Messages request means: Anthropic's `x-api-key` as a
    Bearer key, else its own `Authorization`."""
    key = headers.get("x-api-key")
    return f"Bearer {key}" if key is not None else headers.get("authorization")


def read_messages(
    endpoint: str, body: Any, headers: Mapping[str, str], key: Any, most_deadline: float | None
) -> tuple[dict[str, Any], dict[str, str]]:
    """The router's keyword arguments for a Messages body (`endpoint` "messages" or
    "count_tokens"), checked against the anthropic SDK's types, naming a wrong field;
    the router's own from `policy_router` or the `x-policy-router-*` headers. With them,
    the end user and tags the budgets know the call by (`x-policy-router-user` or the
    body's `metadata.user_id`; `x-policy-router-tags`), which the Messages API has no
    argument for: they go in the router's `scope=`, never to the provider."""
    if not isinstance(body, dict):
        raise ConfigError("the request body must be a JSON object")
    defined = params(endpoint)
    kwargs = {k: v for k, v in body.items() if k != "policy_router"}
    unknown = sorted(set(kwargs) - defined.names)
    if unknown:
        raise ConfigError(
            f"unrecognized request argument supplied: {unknown[0]!r} (this server passes on "
            "only Anthropic's arguments for the Messages API; the router's go in 'policy_router')"
        )
    if not isinstance(kwargs.get("model"), str) or not kwargs["model"]:
        raise ConfigError("'model' is required: the name of a group (GET /v1/models lists them)")
    problem = defined.problem(kwargs)
    if problem is not None:
        place, what = problem
        raise ConfigError(f"{place!r} is not valid: {what} (Anthropic's definition of the Messages API)")
    return {**kwargs, **policy_of(body.get("policy_router"), headers, key, most_deadline)}, _named(kwargs, headers)


def _named(kwargs: Mapping[str, Any], headers: Mapping[str, str]) -> dict[str, str]:
    named: dict[str, str] = {}
    user = headers.get("x-policy-router-user")
    if user is not None:
        if not user.strip():
            raise ConfigError("x-policy-router-user is empty; send the end user's id, or leave the header out")
        given = (kwargs.get("metadata") or {}).get("user_id")
        if given not in (None, user.strip()):
            raise ConfigError("the body's 'metadata.user_id' and x-policy-router-user differ; send one of them")
        named["user"] = user.strip()
    tags = headers.get("x-policy-router-tags")
    if tags is not None:
        listed = [t.strip() for t in tags.split(",") if t.strip()]
        if not listed:
            raise ConfigError("x-policy-router-tags names no tag; send them comma-separated: team:search,batch")
        named["tags"] = ",".join(listed)
    return named


def shaped(routed: Routed[Any]) -> dict[str, Any]:
    """A whole answer as Anthropic's JSON, with the journey in `policy_router`."""
    body = dict(routed.response) if isinstance(routed.response, Mapping) else json.loads(json.dumps(routed.response, default=str))
    body["policy_router"] = journey_of(routed.journey)
    return body


async def events(routed: Routed[Any]) -> AsyncIterator[bytes]:
    """A streamed answer as Anthropic's server-sent events (LiteLLM's, passed as they
    come); an error mid-stream as Anthropic's `error` event; the journey after, as a
    comment line."""
    stream = routed.response
    try:
        async for chunk in stream:
            yield bytes(chunk) if isinstance(chunk, bytes | bytearray) else f"data: {json.dumps(chunk, default=str)}\n\n".encode()
    except Exception as error:  # the router's words for it, scrubbed
        status, body, _ = error_body(error)
        shaped_error = error_of(status, body["error"]["message"])
        yield f"event: error\ndata: {json.dumps(shaped_error)}\n\n".encode()
        return
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()  # a client that went away: the stream's money is settled
    yield f": policy_router {json.dumps(journey_of(stream.journey))}\n\n".encode()


def error_of(status: int, message: str, journey: Any = None) -> dict[str, Any]:
    """Anthropic's error body for `status`."""
    found: dict[str, Any] = {"type": "error", "error": {"type": _TYPES.get(status, "api_error"), "message": message}}
    if journey is not None:
        found["error"]["policy_router"] = journey
    return found


def input_tokens(kwargs: Mapping[str, Any], route: Route) -> int:
    """`count_tokens`' answer: the prompt's tokens (system, messages, tools) as the
    group's first route's tokenizer counts them, LiteLLM's counter, the same count the
    router's context-window rule uses; nothing is sent to a provider."""
    system = kwargs.get("system")
    messages = [{"role": "system", "content": system}] if system else []
    messages += list(kwargs.get("messages") or [])
    tools = [
        {"type": "function", "function": {"name": t.get("name"), "description": t.get("description", ""), "parameters": t.get("input_schema") or {}}}
        for t in kwargs.get("tools") or () if isinstance(t, Mapping)
    ]
    return counter(("messages",), {"messages": messages, "tools": tools or None})(route)
