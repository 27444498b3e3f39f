"""Orderings by name and sticky preference: `register_ordering` and `Order.sticky`.

`register_ordering("name", factory)` makes a caller's own ordering usable by name, in
`Router(order="name")` and in a policy file's `order: name`; the factory is called once per
router (and per group that names it), so each keeps its own state. `Order.sticky(ids,
then=...)` tries the given routes first, in the given order, then the rest as `then` orders
them. Both are `Ordering`s; an ordering with an `on_dispatch(route)` method is told of each
attempt as it is sent, as `on_result` is told how it ended.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ..ground.errors import ConfigError
from .order import Fastest, Order, Ordering, Sticky

__all__ = [
    "choose",
    "make",
    "named",
    "register_ordering",
    "registered",
    "unregister_ordering",
]

_NAME = re.compile(r"^[a-z][a-z0-9_\-]*$")
_LOCK = threading.Lock()
_REGISTRY: dict[str, Callable[[], Ordering]] = {}


def register_ordering(name: str, factory: Callable[[], Ordering]) -> None:
    """Make `factory()` the ordering called `name` (lower case, digits, `_` or `-`).

    A built-in name (`cheapest`, ...) cannot be taken; registering a name again replaces
    it for routers built afterwards (routers already built keep theirs). The factory must
    return an `Ordering` (`order` and `on_result`); that is checked when a router uses it.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(
            f"an ordering's name is lower case letters, digits, '_' or '-', got {name!r}"
        )
    if name in {o.value for o in Order}:
        raise ConfigError(f"{name!r} is a built-in ordering; register yours under another name")
    if not callable(factory):
        raise ConfigError(f"register_ordering({name!r}, factory): factory must be callable")
    with _LOCK:
        _REGISTRY[name] = factory


def unregister_ordering(name: str) -> None:
    """Forget a registered name (routers already built keep their ordering)."""
    with _LOCK:
        _REGISTRY.pop(name, None)


def registered() -> tuple[str, ...]:
    """The names registered so far."""
    with _LOCK:
        return tuple(sorted(_REGISTRY))


def named(name: str) -> str:
    """`name` when it is a built-in ordering's or a registered one's; else a `ConfigError`
    (a `ValueError`) listing them."""
    names = [*(o.value for o in Order), *registered()]
    if name not in names:
        raise ConfigError(
            f"{name!r} is not an ordering; use one of: {', '.join(names)} (or register yours "
            "with policy_router.register_ordering before loading the file)"
        )
    return name


def make(name: str) -> Ordering | None:
    """A new ordering from the factory registered as `name`; None if there is none."""
    with _LOCK:
        factory = _REGISTRY.get(name)
    if factory is None:
        return None
    made = factory()
    if not isinstance(made, Ordering) or isinstance(made, str):
        raise ConfigError(
            f"the factory registered as {name!r} returned {type(made).__name__}, not an "
            "Ordering (an object with order(candidates, context) and on_result(...))"
        )
    return made


def choose(order: Order | str | Ordering, routes: Sequence[Any]) -> Order | Ordering:
    """The ordering `order` names (an `Order`, its value, a registered name, or an
    `Ordering` object); refuses an unknown name, a sticky ordering naming no route, and
    CHEAPEST across tables in different currencies."""
    from .price_table import PriceTable

    if isinstance(order, Sticky):
        known = {r.id for r in routes} | {r.name for r in routes}
        return order.bound(known, choose(order.then, routes))
    if isinstance(order, Ordering) and not isinstance(order, str):
        return order
    if order == Order.FASTEST:
        return Fastest()
    if order == Order.SCORE:
        from .score import Scored

        return Scored()
    try:
        chosen = Order(order)
    except ValueError:
        made = make(order) if isinstance(order, str) else None
        if made is not None:
            return made
        names = ", ".join([*(o.value for o in Order), *registered()])
        raise ConfigError(
            f"order={order!r} is not an ordering; use one of: {names} "
            "(or register yours with policy_router.register_ordering)"
        ) from None
    if chosen is Order.CHEAPEST:
        currencies = {r.prices.currency for r in routes if isinstance(r.prices, PriceTable)}
        if len(currencies) > 1:
            raise ConfigError(
                f"order=cheapest cannot compare prices in {sorted(currencies)}; "
                "give every route a table in one currency"
            )
    return chosen
