"""What follows a failed attempt: a retry on the same route (its `Retry`, the deadline
permitting), the next route, only routes with a larger window (a prompt too long), or a
stop (DESIGN §2's table). `Following` is the part of `Plan` that decides it; it holds no
state of its own.
"""

from __future__ import annotations

from collections import deque

from ..ground.errors import ConfigError
from ..ground.outcome import Fault, FaultKind
from ..ground.records import Check, Skip
from ..policies.candidate import Candidate
from .gate import Send
from .journey import Attempt
from .outcomes import Outcomes

__all__ = ["Following"]


class Following(Outcomes):
    """The steps of a `Plan` that decide what follows a failure (see the module docstring)."""

    def _after(self, send: Send, fault: Fault) -> str:
        """What follows a failure: a retry, the next route, or a stop; queues a retry."""
        if fault.kind is FaultKind.TOO_LONG:
            return self._larger_windows(send, fault)
        if not fault.kind.falls_through:
            self._stop = fault
            if fault.kind.about == "request":
                return "stopped: another model would fail alike"
            return "stopped: a refusal is not shopped around"
        if self.deadline is not None and self.deadline.passed():
            self.expired = True
            return "deadline passed"
        policy = self._retry(send.route) if self._retry is not None else None
        if (
            policy is not None
            and fault.kind is FaultKind.RATE_LIMITED
            and any(c.id != send.candidate.id for c, _, _ in self._queue)
            and not policy.waits_out(fault)
        ):
            # The provider said "not now" without a short wait: another route is asked
            # before this one again.
            policy = None
        wait = None
        if policy is not None:
            try:
                wait = policy.wait(
                    fault, send.number, self._rng, route=send.route.name,
                    first=self._first_sent(send), error=self._redact(send, fault.message),
                )
            except ConfigError as misuse:  # a custom decision that said neither True nor False
                self._misuse, self._stop = misuse, fault
                return f"stopped: {misuse}"
        if wait is not None:
            if self.deadline is not None and wait >= self.deadline.left():
                why = f"retry not taken: waiting {wait:.2f} s would pass the deadline"
                if self._queue:
                    return f"{why}; next route"
                # The wait the request needed is what it had no time for: the deadline's
                # error, the provider's kept as its cause.
                self.expired = True
                return why
            self._queue.appendleft((send.candidate, wait, send.number + 1))
            return f"retry in {wait:.2f} s"
        return "next route" if self._queue else "no route left"

    def _first_sent(self, send: Send) -> bool:
        """Whether `send` went to the route this request was first sent to."""
        for step in self._steps:
            if isinstance(step, Attempt) and step.sent:
                return step.route_id == send.route.id
        return True  # nothing recorded yet: this failure is the request's first attempt

    def _larger_windows(self, send: Send, fault: Fault) -> str:
        """A prompt too long for the route's window moves on only to routes whose window is
        larger, or unknown: never to one known to be no larger, never to the same route
        again; with none left it stops with the provider's error."""
        too_small = send.candidate.window
        kept: deque[tuple[Candidate, float, int]] = deque()
        for entry in self._queue:
            candidate = entry[0]
            if candidate.id == send.candidate.id:
                continue
            if too_small is not None and candidate.window is not None and candidate.window <= too_small:
                self._record(Skip(
                    candidate.name,
                    Check.CONTEXT_WINDOW,
                    f"window {candidate.window:,} is no larger than {send.route.name}'s "
                    f"{too_small:,}, which found the prompt too long",
                    detail={"window": candidate.window, "refused_by": too_small},
                ))
                continue
            kept.append(entry)
        self._queue = kept
        if not kept:
            self._stop = fault
            return "stopped: no route with a larger context window"
        return "next route with a larger context window"

