"""LiteLLM's module-level settings: read to refuse what would defeat the router, and the
one the package writes (`suppress_debug_info`, the banner LiteLLM prints on every failure).
"""

from __future__ import annotations

import litellm

from ...ground.errors import ConfigError

__all__ = ["check_globals", "silence_banner"]


def silence_banner() -> None:
    """Stop LiteLLM printing its "Give Feedback / Get Help" banner to stdout on failures.

    This is the one LiteLLM global the package writes, and only when a `Router` is built
    with `quiet_litellm=True` (the default): a router fails over on purpose, and would
    otherwise print the banner on every skip. Pass `quiet_litellm=False` to keep it.
    """
    litellm.suppress_debug_info = True



def check_globals() -> None:
    """Refuse to route while a LiteLLM global would defeat the router's own decisions.

    A global `litellm.num_retries` overrides a per-call `num_retries=0` (LiteLLM reads
    `kwargs.get("num_retries") or litellm.num_retries`), and a global
    `litellm.model_fallbacks` cannot be overridden per call. They are the user's settings,
    so they are reported rather than reset.
    """
    if litellm.num_retries:
        raise ConfigError(
            f"litellm.num_retries is set to {litellm.num_retries!r}: it overrides the router's "
            "one-request-per-attempt calls. Set litellm.num_retries = None and use "
            "Router(retry=Retry(...)) for retries."
        )
    if getattr(litellm, "model_fallbacks", None):
        raise ConfigError(
            "litellm.model_fallbacks is set: LiteLLM would fall back on its own, behind the "
            "router's floor and budget. Set litellm.model_fallbacks = None and list the "
            "fallback routes in one group instead."
        )
