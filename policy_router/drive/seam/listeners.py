"""Whom LiteLLM tells about a call: the user's callbacks, and its cache.

The drivers ask before they spend CPU for them alone: the labels each attempt carries in
its metadata (`transport`), and reading a stream on to LiteLLM's own end
(`stream_watch.Watch.ends_here`).
"""

from __future__ import annotations

import litellm

__all__ = ["callbacks_registered", "litellm_listens"]

_CALLBACK_LISTS = (
    "callbacks",
    "success_callback",
    "failure_callback",
    "input_callback",
    "_async_success_callback",
    "_async_failure_callback",
)


def callbacks_registered() -> bool:
    """Whether any of LiteLLM's callback lists holds a callback (the user's loggers)."""
    return any(getattr(litellm, name) for name in _CALLBACK_LISTS)


def litellm_listens() -> bool:
    """Whether LiteLLM has anyone to tell of a stream's end: a callback, or its cache
    (which stores a streamed answer once the stream ends)."""
    return litellm.cache is not None or callbacks_registered()
