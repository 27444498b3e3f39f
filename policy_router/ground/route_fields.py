"""The checks a `Route` makes of its fields when it is built: each wrong one is refused
with a `ConfigError` naming the field and the fix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .deadline import check_seconds, check_timeout
from .errors import ConfigError

__all__ = ["check_fields"]


# Keyword arguments the router owns: a caller's or route's value would defeat a promise.
_OWNED = {
    "model": "the model string is the Route's first argument",
    "messages": "messages belong to the call, not the route",
    "stream": "stream belongs to the call, not the route",
    "num_retries": "LiteLLM's retries are off; use retry=Retry(...) on the router or route",
    "max_retries": "LiteLLM's retries are off; use retry=Retry(...) on the router or route",
    "fallbacks": "the router decides fallbacks; list the routes in one group instead",
    "context_window_fallback_dict": "the router decides fallbacks; list routes in one group",
}


def check_fields(
    model: Any,
    group: Any,
    name: Any,
    id: Any,
    litellm_kwargs: Mapping[str, Any],
    enabled: Any,
    counts: Mapping[str, Any],
    seconds: Mapping[str, Any],
) -> str | None:
    """Refuse what is wrong in a route's fields; the `api_base` it names (or None).
    `counts` are whole numbers >= 1 when given, `seconds` numbers of seconds > 0."""
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"Route model must be a LiteLLM model string, got {model!r}")
    for key in litellm_kwargs:
        if key in _OWNED:
            raise ConfigError(f"Route({model!r}): {key}= is not accepted: {_OWNED[key]}")
    if group is not None and (not isinstance(group, str) or not group.strip()):
        raise ConfigError(f"Route({model!r}): group must be a non-empty string, got {group!r}")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ConfigError(f"Route({model!r}): name must be a non-empty string, got {name!r}")
    if id is not None and (not isinstance(id, str) or not id.strip()):
        raise ConfigError(
            f"Route({model!r}): id must be a non-empty string, got {id!r}; "
            "leave it out for the default (the model and its api_base)"
        )
    api_base = litellm_kwargs.get("api_base") or litellm_kwargs.get("base_url")
    if api_base is not None and not isinstance(api_base, str):
        raise ConfigError(f"Route({model!r}): api_base must be a URL string, got {api_base!r}")
    check_timeout(litellm_kwargs.get("timeout"), f"Route({model!r}).timeout")
    for field, value in seconds.items():
        if value is not None:
            check_seconds(value, f"Route({model!r}).{field}")
    for field, value in counts.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"Route({model!r}).{field} must be a whole number >= 1, got {value!r}")
    if not isinstance(enabled, bool):
        raise ConfigError(f"Route({model!r}).enabled must be True or False, got {enabled!r}")
    return api_base
