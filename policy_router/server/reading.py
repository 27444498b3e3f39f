"""A request to the server, read: the endpoint's own arguments (OpenAI's names only), and
the router's (`on_device`, `deadline`, `needs`) from the body's `policy_router` field or
the `x-policy-router-*` headers, never weaker than the key allows.

A field OpenAI's API does not define for the endpoint is refused with a 400 that names it:
the server never passes on what would move a request elsewhere (`api_base`, `api_key`,
`base_url`, a mock, LiteLLM's own retries) or what it does not know to be harmless.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..config.keys import ApiKey
from ..ground.errors import ConfigError

__all__ = ["ENDPOINT_FIELDS", "read"]

_SHARED = frozenset({"model", "user", "metadata", "stream", "stream_options", "extra_body"})

# What OpenAI's API takes for each endpoint (the SDK's own parameters, 2.x).
ENDPOINT_FIELDS: dict[str, frozenset[str]] = {
    "chat": _SHARED | {
        "messages", "audio", "frequency_penalty", "function_call", "functions", "logit_bias",
        "logprobs", "max_completion_tokens", "max_tokens", "modalities", "n",
        "parallel_tool_calls", "prediction", "presence_penalty", "prompt_cache_key",
        "reasoning_effort", "response_format", "safety_identifier", "seed", "service_tier",
        "stop", "store", "temperature", "tool_choice", "tools", "top_logprobs", "top_p",
        "verbosity", "web_search_options",
    },
    "embedding": _SHARED | {"input", "dimensions", "encoding_format"},
    "responses": _SHARED | {
        "input", "background", "conversation", "include", "instructions", "max_output_tokens",
        "max_tool_calls", "parallel_tool_calls", "previous_response_id", "prompt",
        "prompt_cache_key", "reasoning", "safety_identifier", "service_tier", "store",
        "temperature", "text", "tool_choice", "tools", "top_logprobs", "top_p", "truncation",
    },
}

_POLICY = frozenset({"on_device", "deadline", "needs"})


def read(
    endpoint: str,
    body: Any,
    headers: Mapping[str, str],
    key: ApiKey,
    most_deadline: float | None,
) -> dict[str, Any]:
    """The router's keyword arguments for this request (the endpoint's own, then
    `on_device`, `deadline`, `needs`); `ConfigError` naming the field that is wrong.

    `on_device` is the key's floor or the request's, whichever holds; `deadline` the
    request's, no longer than `most_deadline` (the server's); `needs` only adds to what
    the request's own arguments need."""
    if not isinstance(body, dict):
        raise ConfigError("the request body must be a JSON object")
    allowed = ENDPOINT_FIELDS[endpoint]
    kwargs: dict[str, Any] = {}
    for name, value in body.items():
        if name == "policy_router":
            continue
        if name not in allowed:
            raise ConfigError(
                f"unrecognized request argument supplied: {name!r} (this server passes on "
                f"only OpenAI's arguments for {endpoint}; the router's go in 'policy_router')"
            )
        kwargs[name] = value
    if not isinstance(kwargs.get("model"), str) or not kwargs["model"]:
        raise ConfigError("'model' is required: the name of a group (GET /v1/models lists them)")
    asked = body.get("policy_router") or {}
    if not isinstance(asked, dict) or not set(asked) <= _POLICY:
        raise ConfigError(
            f"'policy_router' takes {sorted(_POLICY)}, got {asked!r}"
        )
    on_device = asked.get("on_device", _flag(headers.get("x-policy-router-on-device")))
    if not isinstance(on_device, bool):
        raise ConfigError(f"'policy_router.on_device' must be true or false, got {on_device!r}")
    deadline = asked.get("deadline", _seconds(headers.get("x-policy-router-deadline")))
    if deadline is not None and (
        isinstance(deadline, bool) or not isinstance(deadline, int | float)
        or not math.isfinite(deadline) or deadline <= 0
    ):
        raise ConfigError(f"'policy_router.deadline' must be seconds > 0, got {deadline!r}")
    if most_deadline is not None:
        deadline = most_deadline if deadline is None else min(float(deadline), most_deadline)
    kwargs["on_device"] = key.on_device or on_device
    if deadline is not None:
        kwargs["deadline"] = float(deadline)
    if asked.get("needs") is not None:
        kwargs["needs"] = asked["needs"]
    return kwargs


def _flag(value: str | None) -> Any:
    if value is None:
        return False
    low = value.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    return value  # refused above, named


def _seconds(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return value  # refused above, named
