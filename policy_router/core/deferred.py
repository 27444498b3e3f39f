"""An answered attempt recorded at once and spelled out when first read.

Most calls are answered by the first route, and nobody reads the attempt on the way: the
router's own observers keep it (`History`) or drop it unread (`LogObserver`, while
`policy_router` logging is disabled), and the journey that holds it is read by few
callers. Around a real LiteLLM call the router's code and data are cold, so every field
set costs what its memory costs; making the record's eighteen fields, its `Usage` and its
`Money` on every call was a third of the router's own time. `answered` keeps what the
record is made of instead, and the fields are filled in, all at once and the same as
`outcomes.answer` makes them, the first time any of them is read.

The record is an `Attempt` in every way a reader sees: `isinstance`, every field and
property, `str`, `repr`, equality and hashing (with any `Attempt` of the same fields),
`dataclasses.fields`/`asdict`/`replace`, and a copy or pickle, which is a plain `Attempt`.
It is frozen like one. What it does not promise: `type(a) is Attempt`.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from ..ground.money import Money, Usage
from ..policies.candidate import Candidate
from .gate import listed_cost
from .journey import Attempt
from .outcomes import answer

__all__ = ["LISTED", "DeferredAttempt", "answered", "as_usage"]

_FIELDS = tuple(f.name for f in fields(Attempt))
_NAMES = frozenset(_FIELDS)
_COMPARED = tuple(f.name for f in fields(Attempt) if f.compare)

Counts = tuple[int, int]
"""A usage with nothing but its prompt and reply counts (`reading.counts_of`)."""

LISTED: Any = object()
"""`answered`'s default cost: what the usage costs at the route's own prices."""


def as_usage(usage: Usage | Counts | None) -> Usage | None:
    """`usage` as a `Usage`: counts alone (the common reply's reading) made one."""
    if isinstance(usage, tuple):
        return Usage(prompt=usage[0], completion=usage[1])
    return usage


class DeferredAttempt(Attempt):
    """An answered `Attempt` whose fields are made the first time one is read (see the
    module docstring). Made by `answered`, never by a caller."""

    __slots__ = ("_parts",)

    def __getattr__(self, name: str) -> Any:
        # Called only when a slot is still empty: fill every field, then read this one.
        if name not in _NAMES:
            raise AttributeError(name)
        candidate, group, endpoint, elapsed, usage, model, journey_id, cost = self._parts
        usage = as_usage(usage)
        if cost is LISTED:
            cost = listed_cost(candidate, usage)
        made = answer(candidate.route, group, journey_id, endpoint, elapsed, cost, usage, model=model)
        for field in _FIELDS:
            object.__setattr__(self, field, getattr(made, field))
        return object.__getattribute__(self, name)

    def plain(self) -> Attempt:
        """The same record as a plain `Attempt`."""
        return Attempt(**{f: getattr(self, f) for f in _FIELDS})

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Attempt):
            return all(getattr(self, f) == getattr(other, f) for f in _COMPARED)
        return NotImplemented

    __hash__ = Attempt.__hash__

    def __repr__(self) -> str:
        return repr(self.plain())

    def __reduce__(self) -> tuple[Any, ...]:
        return _plain_attempt, ({f: getattr(self, f) for f in _FIELDS},)


def _plain_attempt(fields: dict[str, Any]) -> Attempt:
    """A copy or an unpickled deferred attempt: the plain `Attempt` of its fields."""
    return Attempt(**fields)


_new = object.__new__
_set_parts = DeferredAttempt.__dict__["_parts"].__set__
_set_journey_id = Attempt.__dict__["journey_id"].__set__


def answered(
    candidate: Candidate,
    group: str,
    journey_id: str,
    endpoint: str,
    elapsed: float,
    usage: Usage | Counts | None,
    model: str | None,
    cost: Money | None = LISTED,
) -> DeferredAttempt:
    """The record `outcomes.answer` makes for an attempt `candidate`'s route answered, with
    `cost` (by default the usage at the route's own prices; a budgeted attempt's is what
    its budget charged), made when first read. `journey_id` is set at once: the log line
    of every attempt names it."""
    made = _new(DeferredAttempt)
    _set_parts(made, (candidate, group, endpoint, elapsed, usage, model, journey_id, cost))
    _set_journey_id(made, journey_id)
    return made
