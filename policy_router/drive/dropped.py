"""Connections of sync streams dropped unread, closed off the thread that dropped them.

A stream dropped without `close()` is collected whenever the garbage collector runs,
which may be inside the HTTP client's own critical section on the same thread (httpcore
holds its pool's lock while it makes a request, and an allocation there can collect an
old stream). Closing the dropped stream's response there asks for that same lock, which
is not reentrant: the thread waits for itself for good (seen in the suite). So `__del__`
only hands the close here (`hand`, a `queue.SimpleQueue.put`, which is safe in `__del__`),
and one daemon thread closes each in turn, taking the lock when its holder lets it go.
What remains at exit is closed then, on the main thread.
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
from collections.abc import Callable

from loguru import logger

__all__ = ["hand", "ready"]

_QUEUE: queue.SimpleQueue[Callable[[], object]] = queue.SimpleQueue()
_started = threading.Event()
_starting = threading.Lock()


def ready() -> None:
    """Start the closing thread, once per process (called where a stream is made, never
    from `__del__`)."""
    if _started.is_set():
        return
    with _starting:
        if not _started.is_set():
            threading.Thread(target=_close_each, name="policy-router-dropped", daemon=True).start()
            _started.set()


def hand(close: Callable[[], object]) -> None:
    """Have `close` called on the closing thread (safe to call from `__del__`)."""
    _QUEUE.put(close)


def _close(close: Callable[[], object]) -> None:
    try:
        close()
    except Exception as error:  # a connection already gone: nothing left to give back
        logger.debug("policy_router: closing a dropped stream's connection: {!r}", error)


def _close_each() -> None:
    while True:
        _close(_QUEUE.get())


@atexit.register
def _close_the_rest() -> None:
    while True:
        try:
            close = _QUEUE.get_nowait()
        except queue.Empty:
            return
        _close(close)


def _forked() -> None:
    # The closing thread did not come along into the child: start another when needed.
    global _started, _starting
    _started, _starting = threading.Event(), threading.Lock()


os.register_at_fork(after_in_child=_forked)
