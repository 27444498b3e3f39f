"""The record of one request: every route skipped or tried, why, and what answered.

Skips and attempts are frozen records in the order they happened. `str(journey)` reads as
a short paragraph a person can act on; `Routed` pairs a response with its journey.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Generic, TypeVar

from ..ground.money import Money, Usage
from ..ground.records import Check, Skip
from ..policies.requirements import Requirements

if TYPE_CHECKING:
    from ..ground.route import Route

__all__ = [
    "CLOSED",
    "Attempt",
    "Explanation",
    "Journey",
    "Routed",
    "Verdict",
    "Waited",
    "journey_of",
    "routed_of",
]


CLOSED = "closed"
"""The outcome of a stream its caller closed before its end."""


@dataclass(kw_only=True, frozen=True, slots=True)
class Attempt:
    """One request sent to a route, and how it ended.

    `sent` is False only for an answer LiteLLM made without sending (`mock_response`, its
    cache): such an attempt is in the journey's steps but not among its `attempts`.

    `outcome` is "answered" or the kind of fault ("server_error", "rate_limited", ...);
    `error` is the provider's error text with the route's secrets redacted. `elapsed` is
    seconds on the router's clock; `wait` is the pause taken before this attempt (a retry).
    `then` says what the router did next: "returned", "next route", "retry", "stopped".
    For a stream (`streamed`), `elapsed` is the time to its first chunk. `usage` is what the
    provider billed, when it said; `cost` is what the budget charged for the attempt (its
    reservation when no usage came: a cut stream, a cancelled call), so a journey's costs
    add up to what `spending()` counts. `group` and `journey_id` tie the attempt to its
    request, and `route_id` is the route's identity (`route` is its display name); they are
    context, left out of equality.
    """

    route: str
    outcome: str
    status: int | None = None
    """The HTTP status the provider failed with, when it sent one (None for an answer)."""
    error: str = ""
    elapsed: float = 0.0
    wait: float = 0.0
    then: str = "returned"
    cost: Money | None = None
    usage: Usage | None = field(default=None, compare=False)
    streamed: bool = field(default=False, compare=False)
    sent: bool = True
    response_model: str | None = field(default=None, compare=False)
    """The model the provider says answered (its `model` field), when it said."""
    group: str = field(default="", compare=False)
    journey_id: str = field(default="", compare=False)
    rested: float = 0.0
    """The seconds of rest this failure started for the route (0.0 when it started none)."""
    route_id: str = field(default="", compare=False)
    endpoint: str = field(default="", compare=False)
    """The endpoint called: "chat", "responses", "embedding" or "completion"."""
    duration: float | None = field(default=None, compare=False)
    """A stream's whole length, first chunk to end (None for a regular call)."""
    exception: BaseException | None = field(default=None, compare=False, repr=False)
    """The exception this attempt failed with (a LiteLLM exception of its own class, its
    status and message), scrubbed of every secret the request knows of; None for an
    answer, or a failure the router itself ended (the deadline, a cancel)."""

    @property
    def ok(self) -> bool:
        """The route answered and the answer was read to its end."""
        return self.outcome == "answered"

    @property
    def answered(self) -> bool:
        """The route answered: read to its end (`ok`), or a stream the caller closed
        before its end (outcome `"closed"`, neither a success nor a failure)."""
        return self.outcome in ("answered", CLOSED)

    def __str__(self) -> str:
        if self.ok and not self.sent:
            text = f"{self.route} answered by LiteLLM itself (a mock or its cache); nothing was sent"
        elif self.ok:
            text = f"{self.route} answered in {self.elapsed:.2f} s"
            text += f" for {self.cost}" if self.cost is not None else ""
            if self.cost is not None and self.usage is None:
                text += " (its reservation: no usage was reported)"
        elif self.outcome == CLOSED:
            text = f"{self.route} answered in {self.elapsed:.2f} s, closed by the caller before its end"
            text += f" ({self.cost})" if self.cost is not None else ""
        else:
            status = f"{self.status} " if self.status else ""
            why = f": {_short(self.error)}" if self.error else ""
            text = f"tried {self.route}: {status}{self.outcome.replace('_', ' ')}{why}"
            rest = f"; it rests {self.rested:.1f} s" if self.rested else ""
            text += f" ({self.then}{rest})" if self.then else rest
        if self.wait:
            text = f"after waiting {self.wait:.2f} s, {text}"
        return text


@dataclass(kw_only=True, frozen=True, slots=True)
class Waited:
    """The request waited `seconds` for capacity (`Router(wait_for_capacity=True)`): every
    route that could serve was full, for the reasons in `why`."""

    seconds: float
    """How long the request waited, on the router's clock."""
    why: str
    """Why each route was full, as the rate-limit skips would have said it."""
    group: str = field(default="", compare=False)
    """The request's group (context, left out of equality)."""
    journey_id: str = field(default="", compare=False)
    """The request's id (context, left out of equality)."""

    @property
    def route(self) -> str:
        return "*"

    def __str__(self) -> str:
        return f"waited {self.seconds:.2f} s for capacity ({self.why})"


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(kw_only=True, frozen=True, slots=True, repr=False)
class Journey:
    """One request's journey through a group: skips and attempts, in order.

    `answered_by` names the route that answered, or is None. `attempts` are the requests
    really sent, so `len(journey.attempts)` equals what the providers received.
    """

    group: str
    """The group the call named (`model=`)."""
    requirements: Requirements
    """What the request needed, as read off its keyword arguments."""
    steps: tuple[Skip | Attempt | Waited, ...]
    """Every skip, attempt and wait for capacity, in the order they happened."""
    answered_by: str | None = None
    """The name of the route that answered, or None."""
    elapsed: float = 0.0
    """Seconds from the call to its answer or error, on the router's clock."""
    id: str = ""
    """The request's id, on its attempts, observers' records, logs and spans."""

    @staticmethod
    def of(error: BaseException) -> Journey | None:
        """The journey an error raised by a routed call carries, typed; None for any other.

        The router attaches the journey as `error.journey` to the LiteLLM exception it
        re-raises and to its own errors; a type checker cannot see an attribute added to
        LiteLLM's classes, so `Journey.of(error)` reads it as a `Journey`:

            except litellm.InternalServerError as error:
                journey = Journey.of(error)   # Journey | None
        """
        journey = getattr(error, "journey", None)
        return journey if isinstance(journey, Journey) else None

    @property
    def skips(self) -> tuple[Skip, ...]:
        return tuple([s for s in self.steps if isinstance(s, Skip)])

    @property
    def attempts(self) -> tuple[Attempt, ...]:
        """The requests really sent (an answer LiteLLM made itself is none)."""
        # A list made then frozen: every answer's body, headers and metrics ask, and a
        # comprehension is cheaper than a generator for the few steps a journey has.
        return tuple([s for s in self.steps if isinstance(s, Attempt) and s.sent])

    @property
    def cost(self) -> Money | None:
        """What the request's attempts cost, when any was priced (one currency)."""
        costs = [a.cost for a in self.attempts if a.cost is not None]
        if not costs:
            return None
        total = costs[0]
        for c in costs[1:]:
            total = total + c
        return total

    @property
    def waits(self) -> tuple[Waited, ...]:
        """Each wait for capacity, in order."""
        return tuple(s for s in self.steps if isinstance(s, Waited))

    @property
    def routes(self) -> tuple[str, ...]:
        """Every route named in the journey, in first-mention order."""
        return tuple(dict.fromkeys(s.route for s in self.steps if not isinstance(s, Waited)))

    def __str__(self) -> str:
        head = f"Request to group {self.group!r} (needs {self.requirements.describe()})"
        body = "; ".join(str(s) for s in self.steps) or "no route was considered"
        sent = len(self.attempts)
        if self.answered_by is not None:
            tail = f"answered by {self.answered_by} after {sent} request{'s' * (sent != 1)}"
        else:
            tail = f"no answer after {sent} request{'s' * (sent != 1)}"
        return f"{head}: {body}. {tail.capitalize()} in {self.elapsed:.2f} s."

    def __repr__(self) -> str:
        sent = len(self.attempts)
        outcome = f"answered by {self.answered_by}" if self.answered_by else "no answer"
        skipped = len(self.skips)
        return (
            f"<Journey {self.group!r}: {outcome} after {sent} request{'s' * (sent != 1)}, "
            f"{skipped} skipped, {self.elapsed:.2f} s>"
        )

    def summary(self) -> str:
        """The journey's last sentence: who answered, after how many requests, how long."""
        return str(self).rsplit(". ", 1)[-1].rstrip(".") + "."

    def _repr_html_(self) -> str:
        rows = "".join(_html_row(s) for s in self.steps)
        return (
            f"<p>{_html(str(self).split(':', 1)[0])}</p><table><tr><th>route</th><th>verdict</th>"
            f"<th>reason</th><th>time</th></tr>{rows}</table><p>{_html(self.summary())}</p>"
        )


def _html_row(step: Skip | Attempt | Waited) -> str:
    if isinstance(step, Waited):
        cells = ("", "waited", step.why, f"{step.seconds:.3f} s")
    elif isinstance(step, Skip):
        cells = (step.route, f"skip: {step.check.value}", step.reason, "")
    else:
        cost = "" if step.cost is None else f", {step.cost}"
        cells = (step.route, step.outcome, step.error or step.then, f"{step.elapsed:.3f} s{cost}")
    return "<tr>" + "".join(f"<td>{_html(c)}</td>" for c in cells) + "</tr>"


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


R = TypeVar("R")


@dataclass(frozen=True, slots=True, repr=False)
class Routed(Generic[R]):
    """A response together with the route that produced it and the request's journey."""

    response: R
    route: Route
    journey: Journey

    @property
    def attempts(self) -> int:
        """How many requests were really sent for this answer."""
        return len(self.journey.attempts)

    @property
    def cost(self) -> Money | None:
        """What this call cost, from the provider's usage and the route's own price table.

        None when the route is unpriced or the provider reported no usage; for a stream,
        read it from the stream's journey once the stream has ended.
        """
        return self.journey.cost

    def __str__(self) -> str:
        return str(self.journey)

    def __repr__(self) -> str:
        cost = f", cost={self.cost}" if self.cost is not None else ""
        return f"<Routed by {self.route.name!r} after {self.attempts} requests{cost}>"

    def _repr_html_(self) -> str:
        return self.journey._repr_html_()


# Every request's journey and answer are made on the hot path, where a frozen dataclass's
# own __init__ (one `object.__setattr__` a field, each a type lookup of the field's name)
# costs about twice what setting each slot through its descriptor does when caches are cold,
# as they are after a LiteLLM call. The makers below set every field, in field order, and
# make the same object (`tests/test_deferred.py` holds them to `__init__`).
_new = object.__new__
_J = tuple(Journey.__dict__[f.name].__set__ for f in fields(Journey))
_R = tuple(Routed.__dict__[f.name].__set__ for f in fields(Routed))


def journey_of(
    group: str,
    requirements: Requirements,
    steps: tuple[Skip | Attempt | Waited, ...],
    answered_by: str | None,
    elapsed: float,
    id: str,
) -> Journey:
    """`Journey(group, requirements, steps, answered_by, elapsed, id)`, made faster."""
    made = _new(Journey)
    group_, requirements_, steps_, answered_by_, elapsed_, id_ = _J
    group_(made, group)
    requirements_(made, requirements)
    steps_(made, steps)
    answered_by_(made, answered_by)
    elapsed_(made, elapsed)
    id_(made, id)
    return made


def routed_of(response: R, route: Route, journey: Journey) -> Routed[R]:
    """`Routed(response, route, journey)`, made faster."""
    made: Routed[R] = _new(Routed)
    response_, route_, journey_ = _R
    response_(made, response)
    route_(made, route)
    journey_(made, journey)
    return made


@dataclass(kw_only=True, frozen=True, slots=True)
class Verdict:
    """What the router would do with one route for a request: try it (and when), or skip."""

    route: str
    """The route's name."""
    position: int | None
    """Its place in the order the routes would be tried (1 first), or None when skipped."""
    check: Check | None
    """The check that would skip it, or None when it would be tried."""
    reason: str
    """Why, as a sentence: the skip's reason, or for a route tried its reach, what it can
    do, its estimate and its rate window."""

    @property
    def would_try(self) -> bool:
        """Whether the route would be sent the request."""
        return self.position is not None


@dataclass(frozen=True, slots=True, repr=False)
class Explanation:
    """The verdict for every route of a group, computed without sending anything."""

    group: str
    """The group explained (`model=`)."""
    requirements: Requirements
    """What the request needs, as read off its keyword arguments."""
    verdicts: tuple[Verdict, ...]
    """One per route of the group: the ordered routes in their order, then those skipped
    before ordering (disabled, an unknown model, the requirements, the floor)."""

    def __str__(self) -> str:
        width = max([len(v.route) for v in self.verdicts] + [5])
        lines = [f"group {self.group!r}, request needs {self.requirements.describe()}:"]
        for v in self.verdicts:
            verdict = f"try #{v.position}" if v.would_try else f"skip ({v.check})"
            lines.append(f"  {v.route:<{width}}  {verdict:<22} {v.reason}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        tried = [v.route for v in self.verdicts if v.would_try]
        skipped = len(self.verdicts) - len(tried)
        order = ", ".join(tried) or "nothing"
        return f"<Explanation {self.group!r}: would try {order}; {skipped} skipped>"

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{_html(v.route)}</td><td>"
            f"{f'try #{v.position}' if v.would_try else f'skip ({v.check})'}</td>"
            f"<td>{_html(v.reason)}</td></tr>"
            for v in self.verdicts
        )
        return (
            f"<p>group <b>{_html(self.group)}</b>, needs {_html(self.requirements.describe())}</p>"
            f"<table><tr><th>route</th><th>verdict</th><th>reason</th></tr>{rows}</table>"
        )
