"""Orderings: which of the routes that *can* serve a request is asked first.

An ordering only reorders. Requirement, floor, breaker and budget checks come first and
after it, so no ordering can bring back a route they removed. Every built-in ordering is
stable: ties keep the order the routes were written in.

Write your own by implementing `Ordering`: a pure `order(candidates, context)` that
returns the candidates in the order to try, and an `on_result(route, outcome, elapsed)`
callback through which any state it keeps advances.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..ground.errors import ConfigError
from ..ground.numbers import check_number
from ..state.store import Health
from .bounds import RequestFacts

if TYPE_CHECKING:
    from .candidate import Candidate

__all__ = [
    "DEFAULT_REPLY_TOKENS",
    "Arrange",
    "ArrangeByHealth",
    "Fastest",
    "Order",
    "OrderContext",
    "Ordering",
    "BY_WINDOWS",
    "arrange",
    "cheapest",
    "least_busy",
    "most_headroom",
    "estimate",
    "healthiest",
    "round_robin",
    "prices_order",
    "ranks_by_health",
    "Sticky",
]

DEFAULT_REPLY_TOKENS = 512
"""The reply length assumed when ordering by price a request that sets no `max_tokens`.

It only orders routes; it never decides whether a call fits a budget (that uses bounds).
"""


class Order(StrEnum):
    """The built-in orderings, by name (`Router(order=Order.CHEAPEST)`, `order: cheapest` in
    a policy file). An ordering only orders the routes every check let through: it never
    adds or removes one, and a route it puts last is still asked when the others fail.
    `Order.sticky(ids, then=...)` asks named routes first; `Fastest()` and your own
    `Ordering` objects are given the same way."""

    AS_LISTED = "as_listed"
    """The order the routes were written in."""
    CHEAPEST = "cheapest"
    """Lowest estimated cost of *this* request first; unpriced routes last, as listed."""
    HEALTHIEST = "healthiest"
    """Fewest consecutive failures first (needs a breaker to count them)."""
    ROUND_ROBIN = "round_robin"
    """Rotates the starting route across calls; concurrent calls start apart."""
    FASTEST = "fastest"
    """Best recent success rate and latency first; routes with no history first of all."""
    LEAST_BUSY = "least_busy"
    """Fewest calls in flight first, counted in the store (so across processes sharing
    it): LiteLLM's `least-busy` strategy."""
    MOST_HEADROOM = "most_headroom"
    """Most of its rpm/tpm left first (the tighter of the two): LiteLLM's
    `usage-based-routing`. Routes without limits count as having all their room."""
    SCORE = "score"
    """Best score from the router's recorded history first (`Router(metrics=...)`, see
    `policies.score`): success, speed and optionally cost, shared by every process
    writing the same metrics store and kept across restarts."""

    @staticmethod
    def sticky(ids: Sequence[str], then: Order | str | Ordering = "as_listed") -> Sticky:
        """These routes first, in this order, then the rest as `then` orders them:
        `Order.sticky(["openai-prod", "azure-eu"], then=Order.CHEAPEST)`. Blank, repeated
        or unknown route names are refused (unknown ones when the router is built)."""
        return Sticky(ids, then)


def _no_failures(route: str) -> int:
    return 0


@dataclass(kw_only=True, frozen=True, slots=True)
class OrderContext:
    """What an ordering may look at besides the candidates.

    `turn` is this call's number in its group (for rotations); `failures(route)` is the
    route's count of consecutive failures in the store; `endpoint` and `streaming` say what
    kind of call it is.
    """

    group: str
    """The group being ordered."""
    facts: RequestFacts | None
    """The request measured (prompt tokens, reply cap) for price decisions, if any."""
    now: float
    """The router's clock now."""
    turn: int = 0
    """This call's number in its group, for rotations."""
    failures: Callable[[str], int] = _no_failures
    """A route's count of consecutive failures in the store, by route name."""
    endpoint: str = "chat"
    """The kind of call: "chat", "embedding", "responses" or "completion" (text)."""
    streaming: bool = False
    """True for a streamed call."""


@runtime_checkable
class Ordering(Protocol):
    """A caller's own ordering: pure `order`, state advanced only in `on_result`.

    Before `order` runs, the routes' health records are fetched in one store call so that
    `context.failures` is a lookup; an ordering that never reads it may set a class
    attribute `reads_health = False` to skip that call (one round trip with Redis).
    """

    def order(self, candidates: Sequence[Candidate], context: OrderContext) -> list[Candidate]: ...

    def on_result(self, route: str, outcome: str, elapsed: float) -> None:
        """Told after every attempt: the route's `id` (what `candidate.id` is, so statistics
        follow a route across renames and groups), "answered" or the fault's kind, and
        seconds taken. An ordering may also define `on_dispatch(route)`, told the id as each
        attempt is sent."""
        ...


def estimate(candidate: Candidate, facts: RequestFacts) -> int | None:
    """The estimated cost of the request on this route in micro-units; None if unpriced."""
    price = candidate.price
    if price is None:
        return None
    return price.estimate(facts.prompt_tokens, facts.reply_tokens or DEFAULT_REPLY_TOKENS)


def cheapest(candidates: Sequence[Candidate], facts: RequestFacts) -> list[Candidate]:
    """Priced routes by estimated cost of this request, then unpriced ones as listed.

    The estimate is the prompt's tokens (counted once per request with LiteLLM's token
    counter) at the input rate plus `max_tokens` (or `DEFAULT_REPLY_TOKENS`) at the output
    rate, so a model with cheap output but expensive input can lose to its opposite on a
    long prompt.
    """
    priced = [(e, i, c) for i, c in enumerate(candidates) if (e := estimate(c, facts)) is not None]
    unpriced = [c for c in candidates if c.price is None]
    return [c for _, _, c in sorted(priced, key=lambda t: (t[0], t[1]))] + unpriced


def healthiest(candidates: Sequence[Candidate], context: OrderContext) -> list[Candidate]:
    """Fewest consecutive failures first; ties keep written order."""
    return sorted(candidates, key=lambda c: context.failures(c.id))


def round_robin(candidates: Sequence[Candidate], context: OrderContext) -> list[Candidate]:
    """The candidates rotated by the call's turn, so successive calls start one further on."""
    if not candidates:
        return []
    k = context.turn % len(candidates)
    return [*candidates[k:], *candidates[:k]]


class Fastest:
    """Orders by a recency-weighted score of success rate and latency.

    Each route keeps an exponentially weighted latency (time to answer; for a stream, to
    its first chunk) and success rate, with weight `alpha` on the newest result. The score
    is latency divided by success rate, so a fast route that fails often sinks. Routes with
    no history score zero: they are tried first, in written order, until measured. State
    advances only in `on_result`; `order` is pure.
    """

    reads_health = False

    def __init__(self, alpha: float = 0.3) -> None:
        self.alpha = check_number(alpha, "Fastest alpha", unit="a weight", at_most=1.0)
        self._lock = threading.Lock()
        self._stats: dict[str, tuple[float, float]] = {}

    def order(self, candidates: Sequence[Candidate], context: OrderContext) -> list[Candidate]:
        with self._lock:
            stats = dict(self._stats)

        def score(c: Candidate) -> float:
            latency, success = stats.get(c.id, (0.0, 1.0))
            return latency / max(success, 0.05)

        return sorted(candidates, key=score)

    def on_result(self, route: str, outcome: str, elapsed: float) -> None:
        """Fold one attempt's outcome and time into the route's score."""
        ok = outcome == "answered"
        with self._lock:
            latency, success = self._stats.get(route, (elapsed, 1.0))
            a = self.alpha
            self._stats[route] = (
                (1 - a) * latency + a * elapsed if ok else latency,
                (1 - a) * success + a * (1.0 if ok else 0.0),
            )


def least_busy(candidates: Sequence[Candidate], windows: Mapping[str, Any]) -> list[Candidate]:
    """Fewest calls in flight first; ties keep written order."""
    return sorted(candidates, key=lambda c: windows[c.id].in_flight if c.id in windows else 0)


def most_headroom(candidates: Sequence[Candidate], windows: Mapping[str, Any]) -> list[Candidate]:
    """Most of the rate window left first (the smaller of rpm's and tpm's share); ties keep
    written order."""

    def left(c: Candidate) -> float:
        w, route = windows.get(c.id), c.route
        if w is None:
            return 1.0
        shares = [1 - w.requests / route.rpm] if route.rpm else []
        shares += [1 - w.tokens / route.tpm] if route.tpm else []
        return min(shares, default=1.0)

    return sorted(candidates, key=lambda c: -left(c))


Arrange = Callable[[Sequence["Candidate"]], Sequence["Candidate"]]
ArrangeByHealth = Callable[[Sequence["Candidate"], Mapping[str, Health]], Sequence["Candidate"]]
ArrangeByWindows = Callable[[Sequence["Candidate"], Mapping[str, Any]], Sequence["Candidate"]]

BY_WINDOWS: Mapping[Order, ArrangeByWindows] = {
    Order.LEAST_BUSY: least_busy,
    Order.MOST_HEADROOM: most_headroom,
}
"""The orderings that read every route's rate window, fetched in one store call."""
_CLOSED = Health()


def prices_order(order: Order | Ordering) -> bool:
    """Whether `order` ranks routes by this request's estimated cost (CHEAPEST, an
    ordering that says it reads prices, as `Order.SCORE` with a cost weight does, or a
    sticky ordering whose rest is one of these): the request's tokens must then be
    counted, the same way for the live call and for `explain`."""
    rest = order.then if isinstance(order, Sticky) else order
    return rest is Order.CHEAPEST or getattr(rest, "reads_prices", False) is True


def ranks_by_health(orders: Sequence[object]) -> bool:
    """Whether any of `orders` ranks routes by their failures (`Order.HEALTHIEST`, alone or
    after a sticky list): the router then counts failures even without a breaker."""
    return any(
        o is Order.HEALTHIEST or getattr(o, "then", None) is Order.HEALTHIEST for o in orders
    )


def arrange(
    order: Order | Ordering, context: OrderContext
) -> tuple[Arrange | None, ArrangeByHealth | None]:
    """One request's ordering: either one that needs nothing from the store, or one that
    is handed every route's health record first (HEALTHIEST, and an Ordering object
    unless it declares `reads_health = False`), which the plan fetches in one store call.
    """
    if order is Order.AS_LISTED or order in BY_WINDOWS:
        return None, None
    if order is Order.CHEAPEST:
        facts = context.facts
        assert facts is not None
        return (lambda cs: cheapest(cs, facts)), None
    if order is Order.ROUND_ROBIN:
        return (lambda cs: round_robin(cs, context)), None
    # Anything but a built-in Order is an Ordering object (checked once, by `choose`): no
    # runtime Protocol isinstance on the hot path, which cost ~20 us a call.
    if not getattr(order, "reads_health", True):
        custom = order
        return (lambda cs: custom.order(cs, context)), None  # type: ignore[union-attr]

    def seeing(seen: Mapping[str, Health]) -> OrderContext:
        return replace(context, failures=lambda name: seen.get(name, _CLOSED).failures)

    if order is Order.HEALTHIEST:
        return None, lambda cs, seen: healthiest(cs, seeing(seen))
    ordering = order
    return None, lambda cs, seen: ordering.order(cs, seeing(seen))  # type: ignore[union-attr]


class Sticky:
    """These routes first, in this order (those that can serve the request), then the
    others as `then` orders them. Each is a route id (or, for convenience, a route's name);
    they are checked against the router's routes when it is built: blank, repeated or
    unknown ones are refused."""

    def __init__(self, ids: Sequence[str], then: Order | str | Ordering = Order.AS_LISTED) -> None:
        if isinstance(ids, str) or not isinstance(ids, Sequence) or not ids:
            raise ConfigError(
                "Order.sticky(ids, then=...) takes a non-empty list of route ids, "
                f"got {ids!r}"
            )
        for i, name in enumerate(ids):
            if not isinstance(name, str) or not name.strip():
                raise ConfigError(f"Order.sticky: ids[{i}] is blank; give a route's id")
        repeated = sorted({n for n in ids if list(ids).count(n) > 1})
        if repeated:
            raise ConfigError(f"Order.sticky: {repeated} given more than once")
        if isinstance(then, Sticky):
            raise ConfigError("Order.sticky(then=...) cannot be another sticky ordering")
        self.ids = tuple(ids)
        self.then: Any = then
        self.reads_health = then is Order.HEALTHIEST or (
            not isinstance(then, Order) and getattr(then, "reads_health", True)
        )

    def bound(self, names: set[str], then: Order | Ordering) -> Sticky:
        """This ordering for a router whose routes have these ids and names; `then` as
        `choose` made it."""
        unknown = [n for n in self.ids if n not in names]
        if unknown:
            raise ConfigError(
                f"Order.sticky names no route with the id (or name) {unknown}; routes are "
                f"{sorted(names)}"
            )
        if isinstance(then, Order) and then in (Order.LEAST_BUSY, Order.MOST_HEADROOM):
            raise ConfigError(
                f"Order.sticky(then={then.value!r}) is not supported: the rate windows it "
                "reads are fetched for a group's own ordering only; use cheapest, "
                "round_robin, healthiest, fastest or your own"
            )
        return Sticky(self.ids, then)

    def order(self, candidates: Sequence[Candidate], context: OrderContext) -> list[Candidate]:
        first: list[Candidate] = []
        for n in self.ids:
            first += [c for c in candidates if n in (c.id, c.name) and c not in first]
        rest = [c for c in candidates if c not in first]
        return first + self._rest(rest, context)

    def _rest(self, rest: list[Candidate], context: OrderContext) -> list[Candidate]:
        then = self.then
        if then is Order.AS_LISTED:
            return rest
        if then is Order.CHEAPEST:
            return cheapest(rest, context.facts) if context.facts is not None else rest
        if then is Order.ROUND_ROBIN:
            return round_robin(rest, context)
        if then is Order.HEALTHIEST:
            return healthiest(rest, context)
        return list(then.order(rest, context))

    def on_result(self, route: str, outcome: str, elapsed: float) -> None:
        if not isinstance(self.then, Order):
            self.then.on_result(route, outcome, elapsed)

    def on_dispatch(self, route: str) -> None:
        tell = getattr(self.then, "on_dispatch", None)
        if callable(tell):
            tell(route)

    def __repr__(self) -> str:
        then = self.then.value if isinstance(self.then, Order) else type(self.then).__name__
        return f"Order.sticky({list(self.ids)!r}, then={then})"
