"""What LiteLLM imports the first time a process needs it, in the middle of a call, loaded
when a router is built instead.

LiteLLM (1.110.2) imports two heavy things lazily, inside the call that first needs them:
its exception mapping asks whether a failure is a guardrail's block by importing
`fastapi.exceptions` when FastAPI is installed (the server extra installs it), and a
stream's first usage count loads the default tiktoken encoding. Each is 0.1-0.2 s of
synchronous work on this machine (2-3 s with one busy thread in the process), run where no
deadline can interrupt it and, on an event loop, stalling every other request: the first
provider error of a process made a call with a 1.8 s deadline answer after 2.2 s, and a
server's first failover stalled every tenant for as long.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from loguru import logger

__all__ = ["preload"]

_lock = threading.Lock()
_loaded = False


def preload() -> None:
    """Load, once per process, what LiteLLM would otherwise import in a call's middle.

    Promises: after it returns, a provider's first failure and a stream's first usage count
    import nothing of LiteLLM's lazy set above. Costs ~0.25 s once per process, paid by the
    first `Router` built. Does not promise a first call as fast as later ones: LiteLLM still
    builds its HTTP clients on a route's first call. Never raises: a LiteLLM release that
    moved these loads them in the call again, as before, and says so at debug level.
    """
    global _loaded
    with _lock:  # a second router built meanwhile waits: its calls then import nothing
        if _loaded:
            return
        for load in _LOADS:
            try:
                load()
            except Exception as error:  # a moved internal: LiteLLM loads it in the call again
                logger.debug("policy_router: could not preload {}: {!r}", load.__name__, error)
        _loaded = True


def _failure_mapping() -> None:
    # LiteLLM's own check, on an exception that is not a block: it imports FastAPI's
    # exceptions (when installed) the way a real failure would.
    from litellm.proxy.guardrails.exception_utils import is_fastapi_http_exception

    is_fastapi_http_exception(Exception(), ())


def _default_encoding() -> None:
    from litellm._lazy_imports import get_default_encoding

    get_default_encoding()


_LOADS: tuple[Callable[[], None], ...] = (_failure_mapping, _default_encoding)
