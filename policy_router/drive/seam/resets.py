"""A connection reset, or closed, under a request before any byte of an answer.

A reset is the one such failure that proves the provider never read what was sent (a server
that read a request and gave up closes the connection; one that closes it with the request
unread, or had closed it already, resets it). A close without a reset proves nothing: the
server may have read the request. Most often either is a kept-alive connection the server
closed while idle, reused as the close crossed the request (see `Fault.stale`). Read by the
errors' names and numbers: neither HTTP client is imported here for it."""

from __future__ import annotations

import errno

__all__ = ["closed", "reset"]

_ERRNOS = frozenset({errno.ECONNRESET, errno.EPIPE})
_NAMES = frozenset({"ClientConnectionResetError", "ConnectionResetError", "BrokenPipeError"})


def reset(error: BaseException) -> bool:
    """Whether `error` says the peer reset the connection, or refused the write as it
    closed: aiohttp's, httpcore's and the OS's words for it."""
    return (
        type(error).__name__ in _NAMES
        or getattr(error, "errno", None) in _ERRNOS
        or "Cannot write to closing transport" in str(error)
    )


def closed(error: BaseException) -> bool:
    """Whether `error` says the server closed the connection before any byte of an answer
    (with no reset): it may have read the request, or closed the connection idle as the
    request crossed the close; only the router, which knows whether a connection to the
    route can have been kept, may ask again (`Fault.stale`)."""
    name = type(error).__name__
    return name == "ServerDisconnectedError" or (
        name == "RemoteProtocolError" and "without sending a response" in str(error)
    )
