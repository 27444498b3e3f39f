"""One worker process of `policy-router serve --workers N`.

uvicorn's supervisor starts each worker as a fresh interpreter and asks it for its app by
import string (`policy_router.server.worker:app`, a factory), so the policy travels in the
environment: `POLICY_ROUTER_SERVE_CONFIG` holds the file's absolute path, or a mapping's
JSON (the demo's). Each worker builds its own router over the store the file names: the
breaker, the budgets and the rate windows are the store's, shared by every worker, which
is why more than one worker needs a store that several processes share.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from .app import create_app
from .serving import CONFIG_VARIABLE, tune_collector

__all__ = ["app"]


def app() -> Any:
    """The worker's ASGI app, for the policy the supervisor put in the environment. On
    Linux the worker is also told to stop (SIGTERM, so with its grace) when the supervisor
    dies: a supervisor killed outright must not leave workers serving its port. What the
    app is built of is frozen out of the collector's reach, and the young generation
    collected less often (`serving.tune_collector`)."""
    _stop_with_parent()
    given = os.environ[CONFIG_VARIABLE]
    built = create_app(json.loads(given) if given.startswith("{") else given)
    tune_collector()
    return built


def _stop_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() == 1:  # the supervisor died before the wish was made
        os.kill(os.getpid(), signal.SIGTERM)


_PR_SET_PDEATHSIG = 1
