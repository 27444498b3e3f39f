"""What follows a failed attempt: a retry on the same route (its `Retry`, the deadline
permitting), the next route, only routes with a larger window (a prompt too long), or a
stop (DESIGN §2's table). `after` decides it over the request's `Course` and `Trail`.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..ground.errors import ConfigError
from ..ground.outcome import Fault, FaultKind
from ..ground.records import Check, Skip
from ..ground.route import Route
from .course import Course, Queued
from .gate import Send
from .trail import Trail

if TYPE_CHECKING:
    from ..ground.deadline import Deadline
    from ..policies.retry import Retry

__all__ = ["after"]


def after(
    course: Course,
    trail: Trail,
    send: Send,
    fault: Fault,
    *,
    retry: Callable[[Route], Retry | None] | None,
    rng: random.Random,
    deadline: Deadline | None,
    fresh: bool = False,
) -> str:
    """What follows `send` failing with `fault` (`retry` gives its route's policy): a
    retry (queued), the next route, or a stop (recorded on `course`); the journey's words
    for it. With `fresh`, the route is asked again at once on a fresh connection (the
    connection it was sent on was a kept-alive one the server had closed)."""
    if fault.kind is FaultKind.TOO_LONG:
        return _larger_windows(course, trail, send, fault)
    if not fault.kind.falls_through:
        course.stop = fault
        if fault.kind.about == "request":
            return "stopped: another model would fail alike"
        return "stopped: a refusal is not shopped around"
    if deadline is not None and deadline.passed():
        course.expired = True
        return "deadline passed"
    if fresh:
        # The server had closed the kept-alive connection the request went out on: the
        # route is not at fault, and a fresh connection reaches it (once per request).
        course.fresh.add(send.candidate.id)
        course.queue.appendleft((send.candidate, 0.0, send.number))
        return "the connection was closed before any answer (kept alive past the server's idle time): asked again on a fresh connection"
    policy = retry(send.route) if retry is not None else None
    if (
        policy is not None
        and fault.kind is FaultKind.RATE_LIMITED
        and any(c.id != send.candidate.id for c, _, _ in course.queue)
        and not policy.waits_out(fault)
    ):
        # The provider said "not now" without a short wait: another route is asked
        # before this one again.
        policy = None
    wait = None
    if policy is not None:
        try:
            wait = policy.wait(
                fault, send.number, rng, route=send.route.name,
                first=trail.first_sent(send), error=trail.redact(send, fault.message),
            )
        except ConfigError as misuse:  # a custom decision that said neither True nor False
            course.misuse, course.stop = misuse, fault
            return f"stopped: {misuse}"
    if wait is not None:
        if deadline is not None and wait >= deadline.left():
            why = f"retry not taken: waiting {wait:.2f} s would pass the deadline"
            if course.queue:
                return f"{why}; next route"
            # The wait the request needed is what it had no time for: the deadline's
            # error, the provider's kept as its cause.
            course.expired = True
            return why
        course.queue.appendleft((send.candidate, wait, send.number + 1))
        return f"retry in {wait:.2f} s"
    return "next route" if course.queue else "no route left"


def _larger_windows(course: Course, trail: Trail, send: Send, fault: Fault) -> str:
    """A prompt too long for the route's window moves on only to routes whose window is
    larger, or unknown: never to one known to be no larger, never to the same route
    again; with none left it stops with the provider's error."""
    too_small = send.candidate.window
    kept: deque[Queued] = deque()
    for entry in course.queue:
        candidate = entry[0]
        if candidate.id == send.candidate.id:
            continue
        if too_small is not None and candidate.window is not None and candidate.window <= too_small:
            trail.record(Skip(
                candidate.name,
                Check.CONTEXT_WINDOW,
                f"window {candidate.window:,} is no larger than {send.route.name}'s "
                f"{too_small:,}, which found the prompt too long",
                detail={"window": candidate.window, "refused_by": too_small},
            ))
            continue
        kept.append(entry)
    course.queue = kept
    if not kept:
        course.stop = fault
        return "stopped: no route with a larger context window"
    return "next route with a larger context window"
