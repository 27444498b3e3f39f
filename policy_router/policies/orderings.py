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
import weakref
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
    "Serialized",
]

_NAME = re.compile(r"^[a-z][a-z0-9_\-]*$")
_LOCK = threading.Lock()
_REGISTRY: dict[str, Callable[[], Ordering]] = {}


def register_ordering(name: str, factory: Callable[[], Ordering]) -> None:
    """Make `factory()` the ordering called `name` (lower case, digits, `_` or `-`).

    A built-in name (`cheapest`, ...) cannot be taken; registering a name again replaces
    it for routers built afterwards (routers already built keep theirs). The factory must
    return an `Ordering` (`order` and `on_result`); that is checked when a router uses it.
    It need not be thread-safe: the router calls one ordering object one call at a time
    (`Serialized`), from every thread and every router that shares it.
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


_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_BY_ID: dict[int, tuple[Any, threading.Lock]] = {}
_GUARD = threading.Lock()


def _lock_of(ordering: Any) -> threading.Lock:
    """One lock per ordering object, however many routers share it."""
    with _GUARD:
        try:
            found = _LOCKS.get(ordering)
            if found is None:
                found = _LOCKS[ordering] = threading.Lock()
            return found
        except TypeError:  # not weakly referable (__slots__ without __weakref__): kept
            kept = _LOCKS_BY_ID.get(id(ordering))
            if kept is None or kept[0] is not ordering:
                kept = _LOCKS_BY_ID[id(ordering)] = (ordering, threading.Lock())
            return kept[1]


class Serialized:
    """Your ordering object, called one call at a time: `order`, `on_result` and
    `on_dispatch` of one object never run at once, from any thread or router, so an
    ordering need not be thread-safe itself. Everything else it has (`reads_health`,
    `scores`, ...) is read from it as it is."""

    def __init__(self, ordering: Any) -> None:
        self.inner = ordering
        self._lock = _lock_of(ordering)

    def order(self, candidates: Sequence[Any], context: Any) -> list[Any]:
        with self._lock:
            return list(self.inner.order(candidates, context))

    def on_result(self, route: str, outcome: str, elapsed: float) -> None:
        with self._lock:
            self.inner.on_result(route, outcome, elapsed)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name == "on_dispatch" and callable(value):

            def on_dispatch(route: str) -> None:
                with self._lock:
                    value(route)

            return on_dispatch
        return value

    def __eq__(self, other: object) -> bool:
        inner = other.inner if isinstance(other, Serialized) else other
        return bool(self.inner is inner)

    def __hash__(self) -> int:
        return id(self.inner)

    def __repr__(self) -> str:
        return repr(self.inner)


def choose(order: Order | str | Ordering, routes: Sequence[Any]) -> Order | Ordering:
    """The ordering `order` names (an `Order`, its value, a registered name, or an
    `Ordering` object); refuses an unknown name, a sticky ordering naming no route, and
    CHEAPEST across tables in different currencies."""
    from .price_table import PriceTable

    if isinstance(order, Sticky):
        known = {r.id for r in routes} | {r.name for r in routes}
        return order.bound(known, choose(order.then, routes))
    if isinstance(order, Ordering) and not isinstance(order, str):
        from .score import Scored

        # The built-in ones keep their own locks; yours is called one call at a time.
        return order if isinstance(order, Fastest | Scored | Serialized) else Serialized(order)
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
            return choose(made, routes)
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
