"""What an outcome means: the plan's steps after an attempt was sent.

The drivers tell the plan how an attempt ended (answered, failed with a classified `Fault`,
abandoned at the deadline, cancelled, a stream that failed after its first chunk); these
methods settle or release what the gate held, tell the breaker, record the attempt, and
ask `core.following` what comes next: a retry, the next route, or a stop.

`Outcomes` is the part of `Plan` that does this; it holds no state of its own.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ..ground.clock import Clock
from ..ground.deadline import Deadline
from ..ground.money import Money, Usage
from ..ground.outcome import Fault, FaultKind
from ..ground.records import Check, Skip
from ..ground.route import Route
from ..ground.secrets import Scrubber, wire_secrets
from ..policies import continuity
from ..policies.candidate import Candidate
from ..state.store import Steps
from .gate import Gate, Send, held_of
from .journey import CLOSED, Attempt, Waited

if TYPE_CHECKING:
    from ..policies.breaker import HealthBook
    from ..policies.hedge import Latencies
    from ..policies.limits import RateBook
    from ..policies.retry import Retry

__all__ = ["Outcomes", "answer"]



class Outcomes:
    """The outcome steps of a `Plan` (see the module docstring)."""

    # The plan's state these steps read and change; `Plan.__init__` sets every one.
    group: str
    id: str
    operation: str
    deadline: Deadline | None
    expired: bool
    _clock: Clock
    _gate: Gate
    _health: HealthBook | None
    _rates: RateBook | None
    _retry: Callable[[Route], Retry | None] | None
    _rng: random.Random
    _on_result: Callable[[str, str, float], None] | None
    _emit: Callable[[object], None]
    _queue: deque[tuple[Candidate, float, int]]
    _steps: list[Skip | Attempt | Waited]
    _answered: Candidate | None
    _stop: Fault | None
    _last_fault: Fault | None
    _misuse: BaseException | None
    scrubber: Scrubber
    _latencies: Latencies | None

    def _redact(self, send: Send, text: str) -> str:
        """`text` without any secret the request knows of, those the attempt carried on
        the wire included (learned now: only a failure is ever redacted)."""
        details = send.wire.details
        if details is not None:
            self.scrubber.learn(wire_secrets(details))
        return self.scrubber.redact(text)

    def _redacted(self, send: Send, fault: Fault) -> Fault:
        """The fault with every secret taken out of its text, for the health record."""
        return replace(fault, message=self._redact(send, fault.message))

    def _id_of(self, name: str) -> str:
        raise NotImplementedError  # the plan knows its routes

    def _record(self, step: Skip | Attempt | Waited) -> None:
        if isinstance(step, Waited) and not step.journey_id:
            step = replace(step, group=self.group, journey_id=self.id)
        elif isinstance(step, Skip) and not step.journey_id:
            # A skip may be shared (sifted once per group and needs): this request's copy.
            step = step.of_request(self.group, self.id, step.route_id or self._id_of(step.route))
        self._steps.append(step)
        self._emit(step)

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
            yield from self._release(send)
            yield from self._end_slot(send, None)
            if self._health is not None:
                yield from self._health.release(send.route.id, send.token)
        # A stream's first chunk proves nothing yet: its end settles and tells the breaker.
        cost = None
        if final and not here:
            cost = yield from self._gate.conclude(send, usage, self._billed(send, usage))
        if final and self.operation == "responses":
            yield from continuity.remember(made, send.route)
        elapsed = self._since(send)
        if not here and self._latencies is not None:
            # The route's time to answer (to its first chunk): what a hedge waits on.
            self._latencies.record(send.route.id, elapsed)
        if self._on_result is not None:
            self._on_result(send.route.id, "answered", elapsed)
        attempt = answer(
            send.route, self.group, self.id, self.operation, elapsed, cost, usage,
            wait=send.wait, streamed=not final, sent=not here, model=model,
        )
        # A stream's attempt is reported to observers once it ends, complete with its cost.
        if final:
            self._record(attempt)
        else:
            self._steps.append(attempt)
        self._answered = send.candidate

    def finished(self, send: Send, usage: Usage | None, *, closed: bool = False) -> Steps[None]:
        """A stream that answered has ended (a success for the breaker) or was `closed` by
        the caller before its end (neither a success nor a failure: a probe it held is
        given back): settle what it cost."""
        if send.wire.local:
            usage = None  # LiteLLM's own stream (a mock): nothing was sent, nothing is owed
        if send.wire.local or closed:
            cost = None if send.wire.local else (yield from self._settle(send, usage))
            yield from self._end_slot(send, self._billed(send, usage))
            if self._health is not None and not send.wire.local:
                yield from self._health.release(send.route.id, send.token)
        else:
            cost = yield from self._gate.conclude(send, usage, self._billed(send, usage))
        then = "closed by the caller" if closed else "returned"
        took = self._since(send)
        # Closed early, it is neither a success nor a failure of its route: its outcome says
        # so to every observer (the metrics store, the report, spans), so an abandoned
        # stream adds nothing to a route's success or speed.
        outcome = CLOSED if closed else "answered"
        self._replace_answer(
            send,
            lambda a: replace(a, cost=cost, usage=usage, then=then, duration=took, outcome=outcome),
        )
        for step in reversed(self._steps):
            if isinstance(step, Attempt) and step.route == send.route.name and step.answered:
                self._emit(step)
                break

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
            cost = yield from self._settle(send, None)
        else:
            yield from self._release(send)
        self._last_fault = fault
        # A request the provider received counts in its window, even refused.
        yield from self._end_slot(send, send.slot_tokens if fault.sent else None)
        if (
            fault.kind is FaultKind.RATE_LIMITED
            and fault.retry_after
            and self._rates is not None
            and (send.route.rpm or send.route.tpm)
        ):
            yield from self._rates.close(send.route.id, fault.retry_after)
        if not fault.sent:
            if self._health is not None:
                yield from self._health.release(send.route.id, send.token)
            self._record(
                Skip(
                    send.route.name,
                    Check.SEND,
                    self._redact(send, fault.message),
                    detail={"about": fault.kind.about},
                )
            )
            if not fault.kind.falls_through:
                self._stop = fault
            elif self.deadline is not None and self.deadline.passed():
                self.expired = True  # cut by the deadline before it left: the deadline's error
            return
        then = self._after(send, fault)

        def record(rested: float) -> None:
            self._record(replace(self._failure(send, fault, then, cost, error), rested=rested))

        yield from self._fault_seen(send, fault, record)

    def _fault_seen(
        self, send: Send, fault: Fault, record: Callable[[float], None]
    ) -> Steps[None]:
        """Tell the breaker, `record` the attempt with the rest it started, then tell the
        ordering."""
        if self._health is not None:
            yield from self._health.failed(
                send.route.id, self._redacted(send, fault), self._clock.now(), send.token, record,
                send.route.name,
            )
        else:
            record(0.0)
        if self._on_result is not None:
            self._on_result(send.route.id, fault.kind.value, self._since(send))
        self._last_fault = fault

    def _after(self, send: Send, fault: Fault) -> str:
        """What follows a failure (`core.following`): a retry, the next route, or a stop."""
        raise NotImplementedError

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
        cost = yield from self._settle(send, usage)
        yield from self._end_slot(send, self._billed(send, usage))
        rested = 0.0
        if self._health is not None:
            rested = yield from self._health.failed(
                send.route.id, self._redacted(send, fault), self._clock.now(), send.token,
                label=send.route.name,
            )
        self._answered = None
        self._last_fault = fault
        restarting = restart and fault.kind.falls_through and bool(self._queue)
        if not restarting:
            self._stop = fault
        then = "restarted from scratch on the next route" if restarting else "raised in the stream"
        failed = replace(
            self._failure(send, fault, then, cost, error), usage=usage, streamed=True,
            rested=rested,
        )
        self._emit(failed)
        if not self._replace_answer(send, lambda _: failed):
            self._steps.append(failed)
        return restarting

    def _failure(
        self,
        send: Send,
        fault: Fault,
        then: str,
        cost: Money | None = None,
        error: BaseException | None = None,
    ) -> Attempt:
        message = self._redact(send, fault.message)  # learns what the attempt carried
        return Attempt(
            route=send.route.name,
            outcome=fault.kind.value,
            status=fault.status,
            error=message,
            elapsed=self._since(send),
            wait=send.wait,
            then=then,
            cost=cost,
            group=self.group,
            journey_id=self.id,
            route_id=send.route.id,
            endpoint=self.operation,
            exception=None if error is None else self.scrubber.scrub(error),
        )

    def _replace_answer(self, send: Send, change: Callable[[Attempt], Attempt]) -> bool:
        for i in range(len(self._steps) - 1, -1, -1):
            step = self._steps[i]
            if isinstance(step, Attempt) and step.route == send.route.name and step.answered:
                self._steps[i] = change(step)
                return True
        return False

    def _settle(self, send: Send, usage: Usage | None) -> Steps[Money | None]:
        return self._gate.settle(send.candidate, held_of(send), usage)

    def _release(self, send: Send) -> Steps[None]:
        return self._gate.release(send.held)

    def _since(self, send: Send) -> float:
        return max(0.0, self._clock.now() - send.started)

    def _end_slot(self, send: Send, tokens: int | None) -> Steps[None]:
        """The attempt's rate slot keeps `tokens` (billed), or is given back (None)."""
        yield from self._gate.end_slot(send.route.id, send.token, send.slot_tokens, tokens)

    def _billed(self, send: Send, usage: Usage | None) -> int | None:
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

