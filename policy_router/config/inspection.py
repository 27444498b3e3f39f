"""What a router holds, read without sending a request: health, windows, spending, the
report, the preflight and the configuration check. `Inspection` is a view over a router's
`Lifecycle`: every method reads the assembly the router runs under now, and those that
touch the store refuse once the router is closed. `Router` hands these calls to it.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import date
from typing import Any

from ..core.journey import Explanation
from ..drive.explaining import explanation
from ..drive.preflight import PreflightVerdict, embeds_only, preflight_route, problems, rest_denied
from ..endpoints import endpoint as endpoint_named
from ..ground.errors import ConfigError
from ..ground.route import shared_ids
from ..observe.metrics.report import report_of, since_cutoff
from ..observe.observers import AttemptLog
from ..observe.report import Report
from ..observe.report import read as read_report
from ..observe.tables import HealthTable, UsageTable
from ..policies.budget import Spending
from ..policies.order import OrderContext
from ..policies.score import RouteScore, Scored
from ..state.store import Health
from . import learning
from .assembly import Assembly
from .lifecycle import Lifecycle

__all__ = ["Inspection"]


class Inspection:
    """The reading side of a router (see the module docstring)."""

    __slots__ = ("_life",)

    def __init__(self, life: Lifecycle) -> None:
        self._life = life

    @property
    def _now(self) -> Assembly:
        return self._life.now

    def _open(self) -> None:
        self._life.ensure_open()

    def unusable(self) -> dict[str, str]:
        """Routes no request can use, by name, each with why and what to do about it."""
        return {
            c.name: c.capabilities.why_unknown
            for cs in self._now.planner.groups.values()
            for c in cs
            if not c.capabilities.known
        }

    def spending(self, /, scope: str | None = None, **named: str) -> Spending:
        """A budget's account: spent, reserved, left, calls, and whether it is exact.

        `spending()` is the router's own budget's; `spending(user="u-42")`,
        `spending(tag="team:search")`, `spending(route="openai-prod")`, `spending(key=...)`,
        `spending(team=...)` or `spending("user:u-42")` one scope's, in its period now (a
        scope with no spend yet is a zero account, not an error). A scope two budgets cover
        (a daily and a monthly cap) gives the tighter (`budgets()` lists both). With a shared store
        that cannot be reached it raises `StoreUnavailableError` rather than report a figure
        it could not read; a scope no budget covers is a `ConfigError`.
        """
        self._open()
        if self._now.budgets is None:
            raise ConfigError("this router has no budget; build it with budget=Budget(...)")
        return self._now.budgets.spending(scope, **named)

    def budgets(self) -> list[Spending]:
        """Every scope's account in its period now: each budget's (at zero when nothing was
        spent), each user, tag, key or team a `per=` budget has seen spend this period, and
        each cap set live; each `Spending` says its `scope`, `period`, `period_start` and
        `resets_at`. Empty for a router without budgets."""
        self._open()
        return [] if self._now.budgets is None else self._now.budgets.every()

    def set_budget(self, scope: str, budget: Any) -> None:
        """Set the cap of `scope` (`"user:u-42"`, `"key:alice"`, `"all"`, ...) live, over the
        configured budgets of that scope, for every process sharing the store (each reads
        it to every call made a second after); `budget` None removes it (the configured ones apply again).
        What the server's `PUT` and `DELETE /v1/budgets/{scope}` do."""
        self._open()
        if self._now.budgets is None:
            raise ConfigError("this router has no budget; build it with budget=Budget(...) or budgets=[...]")
        self._now.budgets.set_cap(scope, budget)

    def health(self) -> HealthTable:
        """Every route's health record by name (closed and untouched routes included), with
        `rest_left`: the seconds of rest left now. The record is kept under the route's
        `id`, so two names for one id (one deployment in two groups) show the same one. A
        dict; a notebook shows it as a table."""
        self._open()
        known, now = self._now.store.all_health(), self._now.clock.now()
        return HealthTable(
            (r.name, replace(h, rest_left=max(h.rest_until - now, 0.0)) if h.rest_until else h)
            for r in self._now.routes
            for h in (known.get(r.id, Health()),)
        )

    def usage(self) -> UsageTable:
        """Every route's rate window now: requests and tokens in the last minute, calls in
        flight, when the next slot frees (shared through the store), by route name. A
        dict; a notebook shows it as a table."""
        self._open()
        windows = self._now.store.windows([r.id for r in self._now.routes])
        return UsageTable((r.name, windows[r.id]) for r in self._now.routes if r.id in windows)

    def report(self, since: float | None = 3600.0) -> Report:
        """Per route over the last `since` seconds (None: all): requests, success rate,
        p50/p95 latency, cost, and the top skip and failure reasons. Read from the router's
        metrics store when it has one (every process writing it under its scope; regular
        and streaming apart, with error, rate-limit and timeout tallies, every route
        listed), else its `AttemptLog`, else this process's last 2,000 attempts and skips.
        Prints as a table; an HTML table in Jupyter."""
        recorder = self._now.recorder
        if recorder is not None:
            self._open()
            recorder.flush(timeout=2.0)
            rows = recorder.store.read(recorder.scope, since_cutoff(since))
            routes = [(r.group, r.id, r.name) for r in self._now.routes]
            return report_of(rows, routes, source=f"{recorder.store.target} ({recorder.scope})", since=since)
        log = next((o for o in self._now.observers if isinstance(o, AttemptLog)), None)
        if log is not None and log.path.exists():
            return read_report(log.path, since)
        return self._now.history.report(since)

    def resting(self) -> dict[str, float]:
        """Routes resting now, by name, with the seconds of rest left."""
        return {
            name: h.rest_left
            for name, h in self.health().items()
            if h.state == "open" and h.rest_left > 0
        }

    def reset(self, route: str | None = None) -> None:
        """Forget the health of one route (by name or id), or of all: they are closed and
        untried again. A route shares its record with every route of the same id."""
        self._open()
        if route is None:
            self._now.store.reset_health(None)
            return
        found = [r.id for r in self._now.routes if route in (r.name, r.id)]
        if not found:
            raise KeyError(f"no route named {route!r} and none with that id")
        for rid in set(found):
            self._now.store.reset_health(rid)

    def preflight(self, *, live: bool = False) -> dict[str, PreflightVerdict]:
        """Ready, Denied(why) or Unknown(why) for every route, before any real request.

        Credentials are checked with LiteLLM's environment validation, counting those the
        route carries under every name LiteLLM reads for its provider; "denied" only when
        a credential is surely missing, "unknown" when its SDK may find one elsewhere (an
        AWS profile, Google's default credentials). With `live=True` a one-token request
        (one word embedded, for an embedding route) is sent to each route, which costs a
        little. With a breaker, a route the *live* check denied rests for the breaker's
        `settled` time; nothing else rests a route.
        """
        self._open()
        verdicts = [
            preflight_route(r, live, embeds_only(self.capabilities(r.name))) for r in self._now.routes
        ]
        return rest_denied(self._now.routes, verdicts, self._now.health, self._now.store, self._now.clock.now())

    async def apreflight(self, *, live: bool = False) -> dict[str, PreflightVerdict]:
        """The async twin of `preflight`."""
        self._open()
        checks = (
            asyncio.to_thread(preflight_route, r, live, embeds_only(self.capabilities(r.name)))
            for r in self._now.routes
        )
        verdicts = await asyncio.gather(*checks)
        return rest_denied(self._now.routes, verdicts, self._now.health, self._now.store, self._now.clock.now())

    def check(self, *, max_age_days: int | None = None, today: date | None = None) -> list[str]:
        """What is wrong with this router's configuration, one sentence per problem.

        Settings of the file it was loaded from that are not applied (a LiteLLM
        `model_list`'s `weight`, a proxy's `general_settings`, ...), unusable routes
        (unknown model, nothing declared), missing credentials, routes a budget will always
        refuse (unpriced, or priced in another currency), routes whose identity follows
        their position or is shared by different keys (see `Route.id`), price tables older than
        `max_age_days`, and a shared store that does not answer. Nothing is sent
        to a provider (a shared store is pinged). An empty list means no problem was found,
        not that every provider will answer: `preflight(live=True)` asks them.
        """
        budget = self._now.budgets.first if self._now.budgets is not None else None
        found = problems(self._now.routes, self.unusable(), budget, self._now.store, max_age_days, today)
        return [*self._life.notes, *shared_ids(list(self._now.routes)), *found]

    def scores(
        self, model: str | None = None, *, streaming: bool = False, endpoint: str = "chat"
    ) -> tuple[RouteScore, ...]:
        """Each route of the group's `RouteScore` from the metrics store's history (regular
        calls, or streaming ones), as listed: the total, its success, speed and cost parts,
        and the evidence behind them. Raises what the store raises (a ranking would fall
        back to the listed order instead)."""
        self._open()
        recorder = self._now.recorder
        if recorder is None:
            raise ConfigError("scores() reads the router's history: build it with metrics=SQLiteMetrics(path)")
        group, candidates = self._now.planner.group(model)
        order = self._now.planner.order_of(group)
        scored = order if isinstance(order, Scored) else learning.bind(Scored(), {}, self._now.args, recorder)[0]
        assert isinstance(scored, Scored)
        context = OrderContext(group=group, facts=None, now=self._now.clock.now(), endpoint=endpoint, streaming=streaming)
        return tuple(scored.scores(candidates, context))

    def explain(
        self,
        /,
        model: str | None = None,
        messages: Any = None,
        *,
        endpoint: str = "chat",
        **kwargs: Any,
    ) -> Explanation:
        """The verdict for every route of the group for this request. Nothing is sent."""
        self._open()
        return explanation(self._now.planner, endpoint_named(endpoint), model, messages, kwargs)

    def flush_metrics(self, timeout: float = 5.0) -> bool:
        """Wait until every attempt recorded so far is written to the metrics store (True),
        or `timeout` passes (False). Writes happen anyway, off the request path; this is for
        a test, a notebook, or a process about to exit."""
        recorder = self._now.recorder
        return True if recorder is None else recorder.flush(timeout)

    def model_info(self, group: str, provider: str = "policy_router") -> dict[str, Any]:
        """What LiteLLM's model info would say of `group` served as `provider/<group>`: each
        `supports_*` flag true when at least one of its routes has it (the router picks that
        route), the largest context window and output limit known, the cheapest route's USD
        price as an estimate. What `integrations.litellm.register` tells LiteLLM; it
        promises nothing about which route answers a given call."""
        return self._now.planner.model_info(group, provider)

    def capabilities(self, route: str) -> frozenset[str]:
        """What the named route can do, as capability names (the endpoints it serves too)."""
        return self._now.planner.serves(route)
