"""A candidate: a route of a group with what it can do, its price and reply limit, looked
up once when the router is built.

LiteLLM's model info reaches it as data (`candidate_for(route, info, streams)`): the
drivers ask LiteLLM, the policies read the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..ground.route import Route
from .bounds import choice_count, reply_tokens
from .capabilities import Capabilities, resolve
from .prices import Price

__all__ = ['Candidate', 'candidate_for']


@dataclass(kw_only=True, frozen=True, slots=True)
class Candidate:
    """A route of a group with what it can do looked up once (at router build time).

    `reply_limit` caps one reply's tokens when a call sets no `max_tokens`: the route's own
    default `max_tokens`, else its declared `output_limit`, else LiteLLM's
    `max_output_tokens` for the model (None: unknown). `sent_cap` is the route's default
    `max_tokens` alone, which goes out with the request. `choices` is the route's default `n`.
    """

    route: Route
    capabilities: Capabilities
    price: Price | None = None
    reply_limit: int | None = None
    choices: int = 1
    sent_cap: int | None = None
    window: int | None = None
    """The most tokens the model takes in, prompt and reply cap (None: unknown)."""
    most_reply: int | None = None
    """The most tokens the model writes in one reply: the route's `output_limit`, else
    LiteLLM's `max_output_tokens` (None: unknown). A call asking for more is not sent."""

    @property
    def name(self) -> str:
        """The route's display name (journeys, logs)."""
        return self.route.name

    @property
    def id(self) -> str:
        """The route's identity: what health, windows and statistics are kept under."""
        return self.route.id



def candidate_for(route: Route, info: Mapping[str, Any] | None, streams: bool) -> Candidate:
    """The route with its capabilities, price and reply limit, once: `info` is LiteLLM's
    model info for it (None when LiteLLM does not know the model), `streams` whether
    LiteLLM streams it natively."""
    sent = reply_tokens(route.kwargs, "max_tokens", "max_completion_tokens")
    most = route.output_limit
    if most is None and info is not None:
        known = info.get("max_output_tokens")
        most = known if isinstance(known, int) and not isinstance(known, bool) and known > 0 else None
    limit = sent if sent is not None else most
    n = choice_count(route.kwargs, "n", "best_of")
    window = route.context_window
    if window is None and info is not None:
        known = info.get("max_input_tokens")
        window = known if isinstance(known, int) and not isinstance(known, bool) and known > 0 else None
    return Candidate(
        route=route,
        capabilities=resolve(route.model, info, streams, route.capabilities),
        price=_price(route),
        reply_limit=limit,
        choices=n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1,
        sent_cap=sent,
        window=window,
        most_reply=most,
    )


def _price(route: Route) -> Price | None:
    # A deployment's own row first, else its base model's (an Azure deployment priced as
    # the model it serves).
    if route.prices is None:
        return None
    info = route.kwargs.get("model_info")
    base = info.get("base_model") if isinstance(info, Mapping) else route.kwargs.get("base_model")
    price: Price | None = route.prices.price_for(route.model)
    if price is None and isinstance(base, str):
        price = route.prices.price_for(base)
    return price
