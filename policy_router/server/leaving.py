"""A client that leaves before its answer: noticed, and the work done for it stopped.

While the router works on a request (a whole answer, or a stream's first chunk), the
server listens for the client's disconnect. When it comes first, the router's call is
cancelled: the provider's connection is closed, and the attempt is settled as the wire
says (charged its reservation once the request had left, since the provider may bill it;
released when it had not), so nothing stays in flight for a client nobody answers. A
server shutting down cancels the same way, after its grace.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeVar

__all__ = ["ClientGone", "unless_gone"]

T = TypeVar("T")

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]


class ClientGone(Exception):
    """The client disconnected before its answer; the work for it was cancelled and
    settled."""


async def unless_gone(receive: Receive, work: Awaitable[T]) -> T:
    """`work`'s result, unless the client (whose ASGI `receive` this is, its body already
    read) disconnects first: then `work` is cancelled, and waited for while it settles,
    and `ClientGone` is raised. A cancellation of the caller (a shutdown past its grace)
    cancels `work` the same way before it goes on.

    `work` runs in the caller's own task, cancelled through it when the client leaves:
    one task (the listener) a request rather than two and a wait over both, ~10 µs less
    a request in the server (measured)."""
    caller = asyncio.current_task()
    assert caller is not None, "unless_gone runs in a task"
    gone = asyncio.ensure_future(_disconnect(receive))
    waiting = True  # the listener cancels the caller only while `work` runs
    left = False

    def cancel(_: asyncio.Future[None]) -> None:
        nonlocal left
        if waiting and not gone.cancelled() and gone.exception() is None:
            left = True
            caller.cancel()

    gone.add_done_callback(cancel)
    try:
        result = await work
    except BaseException as error:
        if not left:
            raise
        caller.uncancel()  # the caller's own cancellations are counted as they were
        raise ClientGone(_GONE) from (None if isinstance(error, asyncio.CancelledError) else error)
    finally:
        waiting = False
        gone.cancel()
    if left:
        # `work` ended on its own after the cancellation was asked for, which may still be
        # due to this task: it is taken here, not at the caller's next wait.
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0)
        caller.uncancel()
        raise ClientGone(_GONE)
    return result


_GONE = "the client disconnected before its answer"


async def _disconnect(receive: Receive) -> None:
    """Returns when the client disconnects (every other message is ignored)."""
    while (await receive())["type"] != "http.disconnect":
        pass
