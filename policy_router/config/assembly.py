"""What a router is made of, built from its constructor's arguments: an `Assembly`.

A router holds one assembly and reads it once per call, so a request in flight finishes
under the assembly it started with while `Router.reconfigure` swaps in the next one.
`assemble(args, previous)` validates everything first (the constructor's own errors) and
builds nothing that outlives a failure; given the previous assembly, it carries what the
router learned: the store (health, rate windows and spend live there, keyed by route id
and budget name), the report's history, each unchanged group's round-robin turn, and each
ordering object (FASTEST's statistics, a caller's own) whose group keeps the same ordering.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.validate import check_policies
from ..drive.planning import Planner
from ..drive.seam import model_info, settings
from ..drive.seam.preload import preload
from ..drive.stream import StreamRestart
from ..ground.clock import Clock, MonotonicClock, wall_of
from ..ground.deadline import check_seconds
from ..ground.errors import ConfigError
from ..ground.route import Route, identities
from ..observe.metrics import Recorder
from ..observe.observers import AttemptLog, Observer, fan_out, router_emit
from ..observe.report import History
from ..policies.breaker import Breaker, HealthBook, breaker_of, counting_for
from ..policies.candidate import candidate_for
from ..policies.hedge import Hedge
from ..policies.order import Order, Ordering, ranks_by_health
from ..policies.orderings import choose
from ..policies.scopes import Budgets
from ..state.memory import InMemoryStore
from ..state.store import Store
from . import learning

__all__ = ["ARGUMENTS", "Assembly", "assemble"]

ARGUMENTS: Mapping[str, Any] = {
    "name": "default",
    "order": Order.AS_LISTED,
    "budget": None,
    "budgets": (),
    "breaker": Breaker(),
    "retry": None,
    "deadline": None,
    "store": None,
    "observers": None,
    "clock": None,
    "stream_failure": "raise",
    "on_restart": None,
    "quiet_litellm": True,
    "wait_for_capacity": False,
    "metrics": None,
    "metrics_scope": None,
    "score": None,
    "hedge": None,
}
"""The constructor's keyword arguments (besides `routes`) and their defaults."""


@dataclass(kw_only=True, frozen=True, slots=True, eq=False)
class Assembly:
    """One configuration of a router, with the parts built from it. Immutable."""

    args: Mapping[str, Any]
    routes: tuple[Route, ...]
    default_order: Order | Ordering
    orders: Mapping[str, Order | Ordering]  # the groups given their own ordering
    given_store: Store  # as passed (or the in-memory one made for it), before binding
    store: Store
    clock: Clock
    emit: Callable[[object], None]
    history: History
    observers: tuple[Observer, ...]
    budgets: Budgets | None
    health: HealthBook | None
    planner: Planner
    restart: bool
    on_restart: Callable[[StreamRestart], None] | None
    recorder: Recorder | None = None

    @property
    def name(self) -> str:
        return str(self.args["name"])


def _routes(routes: Iterable[Route]) -> tuple[Route, ...]:
    listed = list(routes)
    if not listed:
        raise ConfigError("Router needs at least one Route, got none")
    for i, r in enumerate(listed):
        if not isinstance(r, Route):
            raise ConfigError(
                f"routes[{i}] must be a Route, got {type(r).__name__}; "
                "write Route('provider/model', group=...)"
            )
    return tuple(identities(listed))


def _orders(order: Any, routes: tuple[Route, ...], previous: Assembly | None) -> tuple[
    Order | Ordering, dict[str, Order | Ordering]
]:
    """The default ordering and each group's; an ordering object a group had before under
    the same setting is kept, with what it learned."""
    if isinstance(order, Mapping):
        unknown = set(order) - {r.group for r in routes}
        if unknown:
            raise ConfigError(f"order names groups no route is in: {sorted(unknown)}")
        chosen = {g: choose(o, routes) for g, o in order.items()}
        default: Order | Ordering = Order.AS_LISTED
    else:
        chosen, default = {}, choose(order, routes)
    if previous is not None and previous.args["order"] == order:
        # Same setting: the same objects (FASTEST's statistics, a caller's own state).
        chosen = {g: previous.orders.get(g, o) for g, o in chosen.items()}
        default = previous.default_order
    return default, chosen


def _hedge(given: Any, routes: tuple[Route, ...]) -> Hedge | Mapping[str, Hedge | None] | None:
    """The router's `hedge=`: a `Hedge`, a mapping of group to `Hedge` (or None), or None."""
    if given is None or isinstance(given, Hedge):
        return given
    if isinstance(given, Mapping):
        unknown = set(given) - {r.group for r in routes}
        if unknown:
            raise ConfigError(f"hedge names groups no route is in: {sorted(unknown)}")
        for group, hedge in given.items():
            if hedge is not None and not isinstance(hedge, Hedge):
                raise ConfigError(f"hedge[{group!r}] must be a Hedge or None, got {type(hedge).__name__}")
        return dict(given)
    raise ConfigError(
        f"hedge must be a Hedge, a mapping of group to Hedge, or None; got {type(given).__name__}"
    )


def assemble(args: Mapping[str, Any], previous: Assembly | None = None) -> Assembly:
    """The assembly for `args` (the constructor's arguments, `routes` included), carrying
    `previous`'s state where it still applies. Raises `ConfigError` before building
    anything when an argument is wrong."""
    unknown = set(args) - {"routes", *ARGUMENTS}
    if unknown:
        raise ConfigError(f"not a Router argument: {sorted(unknown)}; see help(Router)")
    a = {**ARGUMENTS, **args}
    routes = _routes(a["routes"])
    check_policies(
        a["budget"], a["breaker"], a["retry"], a["store"], a["name"], a["stream_failure"],
        a["on_restart"],
    )
    deadline = check_seconds(a["deadline"], "deadline")
    default, orders = _orders(a["order"], routes, previous)
    recorder = learning.recorder(a, routes, previous)
    default, orders = learning.bind(default, orders, a, recorder)
    settings.check_globals()
    if a["quiet_litellm"]:
        settings.silence_banner()
    preload()
    same_place = previous is not None and all(
        a[k] is previous.args[k] or a[k] == previous.args[k] for k in ("store", "name", "clock")
    )
    clock: Clock = previous.clock if same_place and previous else a["clock"] or MonotonicClock()
    observers = tuple(a["observers"] or ())
    history = previous.history if previous is not None else History()
    if (
        same_place and previous is not None and observers == previous.observers
        and recorder is previous.recorder
    ):
        given, store, emit = previous.given_store, previous.store, previous.emit
    else:
        emit = router_emit(history.keeper(), [*observers, *([recorder] if recorder else [])])
        given = a["store"] if a["store"] is not None else (
            previous.given_store if same_place and previous else InMemoryStore()
        )
        store = given.bind(a["name"], clock, emit)
    budgets = _budgets(a["budget"], a["budgets"], store, routes, clock, emit)
    breaker = breaker_of(a["breaker"]) or counting_for(ranks_by_health([default, *orders.values()]))
    health = HealthBook(breaker, store, emit) if breaker else None
    # A request's start and end go only to the caller's observers that may want them.
    framed = [o for o in observers if not isinstance(o, AttemptLog)]
    planner = Planner(
        [candidate_for(r, *model_info.model_info(r)) for r in routes],
        order=default,
        orders=orders,
        budgets=budgets,
        health=health,
        retry=a["retry"],
        deadline=deadline,
        store=store,
        clock=clock,
        emit=emit,
        wait_for_capacity=bool(a["wait_for_capacity"]),
        frame=fan_out(framed) if framed else None,
        hedge=_hedge(a["hedge"], routes),
        latencies=previous.planner.latencies if previous is not None else None,
        hedge_shares=previous.planner.hedge_shares if previous is not None else None,
    )
    if previous is not None:
        planner.carry_turns(previous.planner)
    return Assembly(
        args={**a, "routes": routes},
        routes=routes,
        default_order=default,
        orders=orders,
        given_store=given,
        store=store,
        clock=clock,
        emit=emit,
        history=history,
        observers=observers,
        budgets=budgets,
        health=health,
        planner=planner,
        restart=a["stream_failure"] == "restart",
        on_restart=a["on_restart"],
        recorder=recorder,
    )


def _budgets(
    own: Any, scoped: Any, store: Store, routes: Sequence[Route], clock: Clock, emit: Callable[[object], None],
) -> Budgets | None:
    """The router's budgets over its store: its `budget=` and its `budgets=[...]`."""
    from ..policies.budget import Budget

    if isinstance(scoped, Budget) or not isinstance(scoped, Sequence) or isinstance(scoped, str):
        raise ConfigError(f"budgets must be a list of Budget, got {type(scoped).__name__}")
    for i, b in enumerate(scoped):
        if not isinstance(b, Budget):
            raise ConfigError(f"budgets[{i}] must be a Budget, got {type(b).__name__}")
    if own is None and not scoped:
        return None
    budgets = Budgets(own, list(scoped), store, routes=routes, wall=wall_of(clock), emit=emit)
    budgets.live()  # the caps set live, read now: no call waits on the store for them
    return budgets
