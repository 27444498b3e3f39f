"""What LiteLLM imports the first time a process needs it, in the middle of a call, loaded
before the calls instead.

LiteLLM (1.110.2) loads two heavy things lazily, inside the call that first needs them:
its exception mapping asks whether a failure is a guardrail's block by importing
`fastapi.exceptions` when FastAPI is installed (the server extra installs it), and a
stream's first usage count loads tiktoken's default encoding. Each is 0.1-0.25 s of
synchronous work on this machine (2-3 s with one busy thread in the process), run where no
deadline can interrupt it and, on an event loop, stalling every other request: the first
provider error of a process made a call with a 1.8 s deadline answer after 2.2 s.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from loguru import logger

__all__ = ["preload"]

_lock = threading.Lock()
_loaded: set[Callable[[], None]] = set()


def preload(*, encoding: bool = False) -> None:
    """Load, once per process, what LiteLLM would otherwise import in a call's middle.

    Promises: after it returns, a provider's first failure imports nothing (FastAPI's
    exceptions when installed: ~0.15 s and ~7 MB, once; every `Router` asks for it). With
    `encoding=True`, a stream's first usage count loads no encoding either (tiktoken's
    default: ~0.15 s and ~41 MB, which a process that never streams never needs, so only
    the server, whose traffic is streams, asks for it). Does not promise a first call as
    fast as later ones: LiteLLM still builds its HTTP clients on a route's first call.
    Never raises: a LiteLLM release that moved these loads them in the call again, as
    before, and says so at debug level.
    """
    with _lock:  # a second router built meanwhile waits: its calls then import nothing
        for load in (_failure_mapping, _default_encoding)[: 2 if encoding else 1]:
            if load in _loaded:
                continue
            try:
                load()
            except Exception as error:  # a moved internal: LiteLLM loads it in the call again
                logger.debug("policy_router: could not preload {}: {!r}", load.__name__, error)
            _loaded.add(load)


def _failure_mapping() -> None:
    # LiteLLM's own check, on an exception that is not a block: it imports FastAPI's
    # exceptions (when installed) the way a real failure would.
    from litellm.proxy.guardrails.exception_utils import is_fastapi_http_exception

    is_fastapi_http_exception(Exception(), ())


def _default_encoding() -> None:
    from litellm._lazy_imports import get_default_encoding

    get_default_encoding()
