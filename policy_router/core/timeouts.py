"""An attempt's timeout: the seconds LiteLLM's HTTP client is given for one send.

The router holds the deadline and a route's own stream limits itself (cancelling, or
abandoning a sync worker); the timeout given to LiteLLM only backs them, so that a
worker left reading a stalled socket is let go soon after.
"""

from __future__ import annotations

from ..ground.deadline import Deadline
from ..ground.route import Route

__all__ = ["attempt_timeout"]

# A deadline of years (`1e10`) is no timeout an HTTP client can hold: a day is.
_LONGEST = 86_400.0


def attempt_timeout(route: Route, timeout: float | None, deadline: Deadline | None) -> float | None:
    """The timeout for an attempt on `route`: the call's own `timeout`, no longer than
    the route's limits' backstop or the deadline's length; None when none applies."""
    limits = [x for x in (route.first_token_timeout, route.stall_timeout) if x]
    if limits:
        # The socket's read timeout backs the route's own limits (which the drivers hold
        # to the letter): a worker left reading a stalled stream is let go soon.
        backstop = max(limits) + 1.0
        timeout = backstop if timeout is None else min(timeout, backstop)
    if deadline is not None:
        # LiteLLM is given the deadline's length, not the time left: LiteLLM keys its
        # cached HTTP client by `timeout`, and a value that changed on every call built a
        # new client and connection for each one.
        length = min(deadline.seconds, _LONGEST)
        timeout = length if timeout is None else min(timeout, length)
    return timeout
