"""Orderings: which of the routes that *can* serve a request is asked first.

An ordering only reorders. Requirement, floor, breaker and budget checks come first and
after it, so no ordering can bring back a route they removed. Every built-in ordering is
stable: ties keep the order the routes were written in.

Write your own by implementing `Ordering`: a pure `order(candidates, context)` that
returns the candidates in the order to try, and an `on_result(route, context, outcome)`
callback through which any state it keeps advances.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .budget import RequestFacts

if TYPE_CHECKING:
    from .plan import Candidate

__all__ = ["DEFAULT_REPLY_TOKENS", "Order", "OrderContext", "Ordering", "cheapest", "estimate"]

DEFAULT_REPLY_TOKENS = 512
"""The reply length assumed when ordering by price a request that sets no `max_tokens`.

It only orders routes; it never decides whether a call fits a budget (that uses bounds).
"""


class Order(StrEnum):
    """The built-in orderings."""

    AS_LISTED = "as_listed"
    """The order the routes were written in."""
    CHEAPEST = "cheapest"
    """Lowest estimated cost of *this* request first; unpriced routes last, as listed."""


@dataclass(frozen=True, slots=True)
class OrderContext:
    """What an ordering may look at besides the candidates."""

    group: str
    facts: RequestFacts | None
    now: float


@runtime_checkable
class Ordering(Protocol):
    """A caller's own ordering: pure `order`, state advanced only in `on_result`."""

    def order(self, candidates: Sequence[Candidate], context: OrderContext) -> list[Candidate]: ...

    def on_result(self, route: str, context: OrderContext, outcome: str) -> None: ...


def estimate(candidate: Candidate, facts: RequestFacts) -> int | None:
    """The estimated cost of the request on this route in micro-units; None if unpriced."""
    price = candidate.price
    if price is None:
        return None
    return price.estimate(facts.prompt_tokens, facts.max_tokens or DEFAULT_REPLY_TOKENS)


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
