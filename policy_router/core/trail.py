"""The trail of one request: every skip, attempt and wait in the order it happened, told to
the observers as it is recorded, with every secret the request knows of taken out.

A `Plan` holds one; its outcome steps (`core.outcomes`, `core.endings`) write to it, and
`Plan.journey` reads it. It decides nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..ground.money import Money
from ..ground.outcome import Fault
from ..ground.records import Skip
from ..ground.secrets import Scrubber, wire_secrets
from ..policies.candidate import Candidate
from .gate import Send
from .journey import Attempt, Waited

__all__ = ["Trail"]

Recorded = Skip | Attempt | Waited


class Trail:
    """What request `id` of `group` did so far, recorded once each (see the module docstring)."""

    __slots__ = ("_candidates", "_emit", "_ids", "group", "id", "operation", "scrubber", "steps")

    def __init__(
        self,
        group: str,
        id: str,
        operation: str,
        candidates: Sequence[Candidate],
        *,
        emit: Callable[[object], None] | None = None,
        secrets: tuple[str, ...] | None = None,
        call: Mapping[str, Any] | None = None,
    ) -> None:
        self.group = group
        self.id = id
        self.operation = operation
        self.steps: list[Recorded] = []
        self._emit = emit or (lambda _record: None)
        self._candidates = candidates
        self._ids: dict[str, str] | None = None
        # Every secret of the group's routes (the planner's `secrets`), of the call's own
        # keywords (`call`), those its attempts put on the wire and the environment holds:
        # taken out of whatever the request records or raises.
        self.scrubber = Scrubber(
            secrets
            if secrets is not None
            else tuple(sorted({x for c in candidates for x in c.route.secrets}, key=len, reverse=True)),
            call,
        )

    def _id_of(self, name: str) -> str:
        if self._ids is None:  # built once a request needs it, not for every plan
            self._ids = {c.name: c.id for c in reversed(self._candidates)}
        return self._ids.get(name, name)

    def record(self, step: Recorded) -> None:
        """Add `step` and tell the observers of it."""
        if isinstance(step, Waited) and not step.journey_id:
            step = replace(step, group=self.group, journey_id=self.id)
        elif isinstance(step, Skip) and not step.journey_id:
            # A skip may be shared (sifted once per group and needs): this request's copy.
            step = step.of_request(self.group, self.id, step.route_id or self._id_of(step.route))
        self.steps.append(step)
        self._emit(step)

    def keep(self, attempt: Attempt) -> None:
        """Add `attempt` without telling the observers yet: a stream's answer, told once the
        stream ends with its cost (`told`)."""
        self.steps.append(attempt)

    def told(self, attempt: Attempt) -> None:
        """Tell the observers of `attempt`, already on the trail."""
        self._emit(attempt)

    def redact(self, send: Send, text: str) -> str:
        """`text` without any secret the request knows of, those the attempt carried on
        the wire included (learned now: only a failure is ever redacted)."""
        details = send.wire.details
        if details is not None:
            self.scrubber.learn(wire_secrets(details))
        return self.scrubber.redact(text)

    def redacted(self, send: Send, fault: Fault) -> Fault:
        """The fault with every secret taken out of its text, for the health record."""
        return replace(fault, message=self.redact(send, fault.message))

    def failure(
        self,
        send: Send,
        fault: Fault,
        then: str,
        elapsed: float,
        cost: Money | None = None,
        error: BaseException | None = None,
    ) -> Attempt:
        """The record of `send` failing with `fault`, `then` saying what followed."""
        message = self.redact(send, fault.message)  # learns what the attempt carried
        return Attempt(
            route=send.route.name,
            outcome=fault.kind.value,
            status=fault.status,
            error=message,
            elapsed=elapsed,
            wait=send.wait,
            then=then,
            cost=cost,
            group=self.group,
            journey_id=self.id,
            route_id=send.route.id,
            endpoint=self.operation,
            exception=None if error is None else self.scrubber.scrub(error),
        )

    def answer_of(self, send: Send) -> Attempt | None:
        """The latest answered attempt of `send`'s route, if any."""
        for step in reversed(self.steps):
            if isinstance(step, Attempt) and step.route == send.route.name and step.answered:
                return step
        return None

    def replace_answer(self, send: Send, change: Callable[[Attempt], Attempt]) -> bool:
        """Replace the latest answered attempt of `send`'s route by `change(it)`; False when
        there is none."""
        for i in range(len(self.steps) - 1, -1, -1):
            step = self.steps[i]
            if isinstance(step, Attempt) and step.route == send.route.name and step.answered:
                self.steps[i] = change(step)
                return True
        return False

    def first_sent(self, send: Send) -> bool:
        """Whether `send` went to the route this request was first sent to."""
        for step in self.steps:
            if isinstance(step, Attempt) and step.sent:
                return step.route_id == send.route.id
        return True  # nothing recorded yet: this failure is the request's first attempt
