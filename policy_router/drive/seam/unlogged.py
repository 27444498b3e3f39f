"""The checkpoint for the calls LiteLLM does not log before sending.

LiteLLM's embedding and Responses paths (litellm 1.110.2) take `logger_fn` and never call
it: their pre-call log goes to LiteLLM's callbacks only, and a per-call `callbacks=` list
would be added to LiteLLM's global lists for good (`utils.function_setup`). So for these
calls the attempt's checkpoint is asked just before LiteLLM is called, with what LiteLLM
will send read the way LiteLLM reads it, on the safe side: every base URL it may use (the
route's, a global `litellm.api_base`, the provider's `*_API_BASE` variable, LiteLLM's own
default for the provider) is checked, and the body is the call's own keywords. A test
(`tests/test_wire.py`) asserts that LiteLLM still does not log these calls, so a release
that starts to makes the double check visible.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import litellm

from ...ground.outcome import Wire, WireRefusal
from ...ground.reach import base_variables
from ...ground.route import Route

__all__ = ["UNLOGGED", "bases_of", "check_before"]

UNLOGGED = frozenset({"embedding", "aembedding", "responses", "aresponses", "anthropic_messages"})
"""LiteLLM's functions whose path never calls `logger_fn` (measured, litellm 1.110.2), or
calls it only for some providers: a Messages call reaches an `openai/` route through its
Responses bridge, which does not log, and a chat-only one through chat, which does (there
the check runs twice, the same judgement)."""

_NO_SECRET = ("api_key",)


def bases_of(route: Route, kwargs: Mapping[str, Any]) -> list[str]:
    """Every base URL LiteLLM may send the route's request to."""
    given = kwargs.get("api_base") or kwargs.get("base_url")
    found: list[str] = [str(given)] if given else []
    if isinstance(litellm.api_base, str) and litellm.api_base:
        found.append(litellm.api_base)  # some paths (Ollama's) prefer it to the route's
    if given:
        return found
    provider = str(kwargs.get("custom_llm_provider") or route.provider)
    found += [os.environ[name] for name in base_variables(provider) if os.environ.get(name)]
    try:
        resolved = litellm.get_llm_provider(route.model)[3]
    except Exception:
        resolved = None
    if resolved:
        found.append(str(resolved))
    return found


def check_before(function: str, route: Route, kwargs: Mapping[str, Any], wire: Wire) -> None:
    """Ask the attempt's checkpoint about a call LiteLLM will not log (`UNLOGGED`), once
    for every base URL it may use; raise `WireRefusal` when it refuses, before anything is
    sent."""
    if wire.judge is None or function not in UNLOGGED:
        return
    headers = {**(kwargs.get("headers") or {}), **(kwargs.get("extra_headers") or {})}
    body = {k: v for k, v in kwargs.items() if k not in _NO_SECRET}
    bases = bases_of(route, kwargs) or [""]
    for base in bases:
        details = {
            "log_event_type": "pre_api_call",
            "api_key": kwargs.get("api_key"),
            "additional_args": {
                "api_base": base or None,
                "headers": headers,
                "complete_input_dict": body,
            },
        }
        refused = wire.judge(details, wire)
        if refused is not None:
            wire.stopped = refused
            raise WireRefusal(refused)
