"""What an outcome means: the plan's steps after an attempt was sent.

The drivers tell the plan how an attempt ended (answered, failed with a classified `Fault`,
abandoned at the deadline, cancelled, a stream that failed after its first chunk); these
methods settle or release what the gate held, tell the breaker, record the attempt, and
ask `core.following` what comes next: a retry, the next route, or a stop.

A `Plan` holds one `Outcomes` and hands it the drivers' news; the endings (the caller
stopped waiting: `core.endings`) are functions over it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ..ground.clock import Clock
from ..ground.money import Money, Usage
from ..ground.outcome import Fault, FaultKind
from ..ground.records import Check, Skip
from ..ground.route import Route
from ..policies import continuity
from ..state.store import Steps
from . import following
from .course import Course
from .gate import Gate, Send, held_of
from .journey import CLOSED, Attempt
from .trail import Trail

if TYPE_CHECKING:
    from ..ground.deadline import Deadline
    from ..policies.breaker import HealthBook
    from ..policies.hedge import Latencies
    from ..policies.retry import Retry

__all__ = ["Outcomes", "answer"]


class Outcomes:
    """The outcome steps of one request (see the module docstring): they change its
    `Course`, write its `Trail`, and settle through its `Gate`."""

    __slots__ = (
        "_on_result", "_retry", "_rng", "clock", "course", "deadline", "gate", "latencies",
        "trail",
    )

    def __init__(
        self,
        course: Course,
        trail: Trail,
        gate: Gate,
        *,
        clock: Clock,
        deadline: Deadline | None = None,
        retry: Callable[[Route], Retry | None] | None = None,
        rng: random.Random,
        on_result: Callable[[str, str, float], None] | None = None,
        latencies: Latencies | None = None,
    ) -> None:
        self.course = course
        self.trail = trail
        self.gate = gate
        self.deadline = deadline
        self.latencies = latencies
        self.clock = clock
        self._retry = retry
        self._rng = rng
        self._on_result = on_result

    @property
    def health(self) -> HealthBook | None:
        return self.gate.health

    def answered(
        self,
        send: Send,
        usage: Usage | None = None,
        *,
        final: bool = True,
        model: str | None = None,
        made: str | None = None,
    ) -> Steps[None]:
        """The route answered. For a stream (`final=False`) its first chunk arrived, and
        its cost is settled later by `finished`. `made` is the answer's id: a Responses
        answer is remembered as the route's, which continues it (`policies.continuity`).

        An answer LiteLLM made itself (`send.wire.local`: a mock, its cache) was never
        sent: it costs nothing, takes no rate slot and tells the breaker nothing."""
        here = send.wire.local
        if here:
            usage = None
            yield from self.release(send)
            yield from self.end_slot(send, None)
            if self.gate.health is not None:
                yield from self.gate.health.release(send.route.id, send.token)
        # A stream's first chunk proves nothing yet: its end settles and tells the breaker.
        cost = None
        if final and not here:
            cost = yield from self.gate.conclude(send, usage, self.billed(send, usage))
        if final and self.trail.operation == "responses":
            yield from continuity.remember(made, send.route)
        elapsed = self.since(send)
        if not here and self.latencies is not None:
            # The route's time to answer (to its first chunk): what a hedge waits on.
            self.latencies.record(send.route.id, elapsed)
        if self._on_result is not None:
            self._on_result(send.route.id, "answered", elapsed)
        attempt = answer(
            send.route, self.trail.group, self.trail.id, self.trail.operation, elapsed, cost, usage,
            wait=send.wait, streamed=not final, sent=not here, model=model,
        )
        # A stream's attempt is reported to observers once it ends, complete with its cost.
        if final:
            self.trail.record(attempt)
        else:
            self.trail.keep(attempt)
        self.course.answered = send.candidate

    def finished(self, send: Send, usage: Usage | None, *, closed: bool = False) -> Steps[None]:
        """A stream that answered has ended (a success for the breaker) or was `closed` by
        the caller before its end (neither a success nor a failure: a probe it held is
        given back): settle what it cost."""
        if send.wire.local:
            usage = None  # LiteLLM's own stream (a mock): nothing was sent, nothing is owed
        if send.wire.local or closed:
            cost = None if send.wire.local else (yield from self.settle(send, usage))
            yield from self.end_slot(send, self.billed(send, usage))
            if self.gate.health is not None and not send.wire.local:
                yield from self.gate.health.release(send.route.id, send.token)
        else:
            cost = yield from self.gate.conclude(send, usage, self.billed(send, usage))
        then = "closed by the caller" if closed else "returned"
        took = self.since(send)
        # Closed early, it is neither a success nor a failure of its route: its outcome says
        # so to every observer (the metrics store, the report, spans), so an abandoned
        # stream adds nothing to a route's success or speed.
        outcome = CLOSED if closed else "answered"
        self.trail.replace_answer(
            send,
            lambda a: replace(a, cost=cost, usage=usage, then=then, duration=took, outcome=outcome),
        )
        told = self.trail.answer_of(send)
        if told is not None:
            self.trail.told(told)

    def failed(
        self, send: Send, fault: Fault, error: BaseException | None = None
    ) -> Steps[None]:
        """The route failed with `fault` (raised as `error`, kept scrubbed on the attempt)
        before answering: release, and decide what next.

        A fault that never left this process (`fault.sent` is False) is no attempt: it is
        recorded as "not sent", the breaker is not told, and the request stops when the
        fault is about the request (every route would fail alike) or moves on when it is
        about the route (a missing key).
        """
        cost = None
        if fault.sent and fault.billed:
            # It may have been billed (a timeout, a connection dropped after the write): the
            # budget charges its reservation, counted as unmeasured, so the cap still holds.
            cost = yield from self.settle(send, None)
        else:
            yield from self.release(send)
        self.course.last_fault = fault
        # A request the provider received counts in its window, even refused.
        yield from self.end_slot(send, send.slot_tokens if fault.sent else None)
        if (
            fault.kind is FaultKind.RATE_LIMITED
            and fault.retry_after
            and self.gate.rates is not None
            and (send.route.rpm or send.route.tpm)
        ):
            yield from self.gate.rates.close(send.route.id, fault.retry_after)
        if not fault.sent:
            if self.gate.health is not None:
                yield from self.gate.health.release(send.route.id, send.token)
            self.trail.record(
                Skip(
                    send.route.name,
                    Check.SEND,
                    self.trail.redact(send, fault.message),
                    detail={"about": fault.kind.about},
                )
            )
            if not fault.kind.falls_through:
                self.course.stop = fault
            elif self.deadline is not None and self.deadline.passed():
                self.course.expired = True  # cut by the deadline before it left: the deadline's error
            return
        # A kept-alive connection the server had closed says nothing of the route: the
        # first time in a request it is asked again on a fresh connection instead. A reset
        # proves it; a close proves it only where a connection to it can have been kept.
        fresh = fault.stale and send.candidate.id not in self.course.fresh and (
            not fault.billed or (self.latencies is not None and send.route.id in self.latencies.answered)
        )
        then = self.after(send, fault, fresh)

        def record(rested: float) -> None:
            self.trail.record(replace(self.failure(send, fault, then, cost, error), rested=rested))

        if fresh:
            if self.gate.health is not None:
                yield from self.gate.health.release(send.route.id, send.token)
            record(0.0)
            return
        yield from self.fault_seen(send, fault, record)

    def fault_seen(
        self, send: Send, fault: Fault, record: Callable[[float], None]
    ) -> Steps[None]:
        """Tell the breaker, `record` the attempt with the rest it started, then tell the
        ordering."""
        if self.gate.health is not None:
            yield from self.gate.health.failed(
                send.route.id, self.trail.redacted(send, fault), self.clock.now(), send.token, record,
                send.route.name,
            )
        else:
            record(0.0)
        if self._on_result is not None:
            self._on_result(send.route.id, fault.kind.value, self.since(send))
        self.course.last_fault = fault

    def after(self, send: Send, fault: Fault, fresh: bool = False) -> str:
        """What follows a failure (`core.following`): a retry, the next route, or a stop."""
        return following.after(
            self.course, self.trail, send, fault, retry=self._retry, rng=self._rng,
            deadline=self.deadline, fresh=fresh,
        )

    def failed_after_answer(
        self,
        send: Send,
        fault: Fault,
        usage: Usage | None = None,
        *,
        restart: bool = False,
        error: BaseException | None = None,
    ) -> Steps[bool]:
        """A stream that had started failed later: recorded, and the answer is void.

        The provider generated (and will bill) part of a reply, so the call is charged: by
        its usage when known, else at its reservation, counted as unmeasured. The failure
        replaces the attempt's "answered" record: one request, one attempt. With `restart`
        the request goes on to the next route when there is one; returns whether it does.
        """
        cost = yield from self.settle(send, usage)
        yield from self.end_slot(send, self.billed(send, usage))
        rested = 0.0
        if self.gate.health is not None:
            rested = yield from self.gate.health.failed(
                send.route.id, self.trail.redacted(send, fault), self.clock.now(), send.token,
                label=send.route.name,
            )
        self.course.answered = None
        self.course.last_fault = fault
        restarting = restart and fault.kind.falls_through and bool(self.course.queue)
        if not restarting:
            self.course.stop = fault
        then = "restarted from scratch on the next route" if restarting else "raised in the stream"
        failed = replace(
            self.failure(send, fault, then, cost, error), usage=usage, streamed=True,
            rested=rested,
        )
        self.trail.told(failed)
        if not self.trail.replace_answer(send, lambda _: failed):
            self.trail.keep(failed)
        return restarting

    def failure(
        self,
        send: Send,
        fault: Fault,
        then: str,
        cost: Money | None = None,
        error: BaseException | None = None,
    ) -> Attempt:
        """The record of `send` failing with `fault`, timed now."""
        return self.trail.failure(send, fault, then, self.since(send), cost, error)

    def settle(self, send: Send, usage: Usage | None) -> Steps[Money | None]:
        return self.gate.settle(send.candidate, held_of(send), usage)

    def release(self, send: Send) -> Steps[None]:
        return self.gate.release(send.held)

    def since(self, send: Send) -> float:
        return max(0.0, self.clock.now() - send.started)

    def end_slot(self, send: Send, tokens: int | None) -> Steps[None]:
        """The attempt's rate slot keeps `tokens` (billed), or is given back (None)."""
        yield from self.gate.end_slot(send.route.id, send.token, send.slot_tokens, tokens)

    def billed(self, send: Send, usage: Usage | None) -> int | None:
        return usage.prompt + usage.completion if usage is not None else send.slot_tokens


def answer(
    route: Route,
    group: str,
    journey_id: str,
    endpoint: str,
    elapsed: float,
    cost: Money | None,
    usage: Usage | None,
    *,
    wait: float = 0.0,
    streamed: bool = False,
    sent: bool = True,
    model: str | None = None,
) -> Attempt:
    """The record of an attempt `route` answered, for request `journey_id` of `group`."""
    # Every field by position (the field order of `Attempt`): one call per answered
    # request, on the path where matching keywords to parameters shows.
    return Attempt(
        route=route.name, outcome="answered", status=None, error="", elapsed=elapsed, wait=wait, then="returned", cost=cost, usage=usage, streamed=streamed,
        sent=sent, response_model=model, group=group, journey_id=journey_id, rested=0.0, route_id=route.id, endpoint=endpoint, duration=None,
    )

