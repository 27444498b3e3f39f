"""Connections of sync streams dropped unread, closed off the thread that dropped them.

A stream dropped without `close()` is collected whenever the garbage collector runs,
which may be inside the HTTP client's own critical section on the same thread (httpcore
holds its pool's lock while it makes a request, and an allocation there can collect an
old stream). Closing the dropped stream's response there asks for that same lock, which
is not reentrant: the thread waits for itself for good (seen in the suite). So `__del__`
only hands the close here (`hand`, a `queue.SimpleQueue.put`, which is safe in `__del__`),
and one daemon thread closes each in turn, taking the lock when its holder lets it go.
What remains at exit is closed then, on the main thread.

A stream found in a reference cycle (a failed attempt's exception keeps the frames that
made the stream) is not dropped when its reader lets it go but when the collector runs,
and the collector would finalize the provider's own stream in the same pass, closing its
response right there. So every sync stream handed to a caller is kept here (`keep`)
until the router has closed it (`let_go`): it is never garbage while its response is open.
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
from collections.abc import Callable

from loguru import logger

__all__ = ["hand", "keep", "let_go", "ready"]

_QUEUE: queue.SimpleQueue[object] = queue.SimpleQueue()
# The sync streams handed to callers and not yet closed by the router, by id (a dict's
# item set and pop are atomic under the GIL, from any thread or a `__del__`).
_KEPT: dict[int, object] = {}
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


def keep(source: object) -> None:
    """Hold `source` (a stream handed to a caller) until `let_go`: whatever cycle its
    reader leaves it in, the collector never finalizes it while it is open."""
    _KEPT[id(source)] = source


def let_go(source: object) -> None:
    """Stop holding `source` (closed by the router, or never kept)."""
    _KEPT.pop(id(source), None)


def hand(source: object) -> None:
    """Have `source` closed on the closing thread, then let go (safe to call from
    `__del__`)."""
    _QUEUE.put(source)


def _close(source: object) -> None:
    close: Callable[[], object] | None = getattr(source, "close", None)
    try:
        if close is not None:
            close()
    except Exception as error:  # a connection already gone: nothing left to give back
        logger.debug("policy_router: closing a dropped stream's connection: {!r}", error)
    finally:
        let_go(source)


def _close_each() -> None:
    while True:
        _close(_QUEUE.get())


@atexit.register
def _close_the_rest() -> None:
    while True:
        try:
            source = _QUEUE.get_nowait()
        except queue.Empty:
            return
        _close(source)


def _forked() -> None:
    # The closing thread did not come along into the child: start another when needed.
    global _started, _starting
    _started, _starting = threading.Event(), threading.Lock()


os.register_at_fork(after_in_child=_forked)
