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
    cancels `work` the same way before it goes on."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnect(receive))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        gone.cancel()
        await _stopped(task)
        raise
    if task.done():
        gone.cancel()
        return task.result()
    await _stopped(task)
    raise ClientGone("the client disconnected before its answer")


async def _stopped(task: asyncio.Future[Any]) -> None:
    """Cancel `task` and wait for it to end (its settling included), whatever it raises."""
    task.cancel()
    with contextlib.suppress(BaseException):
        await task


async def _disconnect(receive: Receive) -> None:
    """Returns when the client disconnects (every other message is ignored)."""
    while (await receive())["type"] != "http.disconnect":
        pass
