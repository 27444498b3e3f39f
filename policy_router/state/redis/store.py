"""RedisStore: one budget and one breaker for every process that names the same Redis.

The same interface as `InMemoryStore` (see `state.store`); nothing above the store changes.

Budget: `reserve`, `settle` and `release` are one Lua script each, keyed by the
reservation's id: a reserve of an id already held holds it once, a settle or release applies
only while the id is held and marks it done in the same script, so any of them repeated (a
client retry on a new connection, a replay from the backlog after a lost reply) changes
nothing. Processes on any number of machines share one cap and cannot overshoot it when
every call's bound is finite.

Health: see `health.py` (records on the server's clock, versioned writes applied once per
write id, probes owned by the attempt that claimed them). Responses: `responses.py`.

Sync calls use redis-py's `redis` client; async calls await a `redis.asyncio` client of their
own event loop (the core yields its store calls, `state.store`): no loop waits on Redis.

When Redis cannot be reached (refused, timed out, wrong password), the store fails in the
safe direction. Budget checks fail closed: the budget refuses every route with "budget
store unreachable" and nothing is sent. A settle or release that could not be written is
kept in order and written first when Redis answers again, so no cost is lost while the
process lives. Health falls back to this process's own view; the router's observers are
told `StoreLost` once per outage (a WARNING line by default) and `StoreBack` when the
store, trying again every `retry_every` seconds, finds Redis answering.

Budgets are as durable as Redis is: run it with `appendonly yes` (`appendfsync always` to
lose no acknowledged write when it is killed), or a restarted Redis starts every budget at 0.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

from ...ground.clock import Clock, MonotonicClock
from ...ground.errors import StoreUnavailableError
from ...ground.handing import handed
from ..admission import Admission, Admitting, Settlement
from ..memory import InMemoryStore
from ..store import Health, SpendState, StoreCall
from ..windows import Window
from . import admission as at_once
from . import budget as budget_script
from .health import ALL, DONE_TTL, Keys, Update, decode_all, free_probe
from .health import arun as arun_update
from .health import run as run_update
from .keyspace import KeySpace
from .limits import close_args, finish_write, take_args, windows_args
from .limits import decode as decode_window
from .limits import decode_all as decode_windows
from .link import Link
from .options import checked_options
from .responses import RememberedResponses

# Outcome writes: whatever their fate, the attempt no longer needs its probe.
_OUTCOMES = (":release", ":succeeded", ":failed")
_Client = Any  # redis-py's clients are taken as Any (see `link.py`)

__all__ = ["RedisStore"]


class RedisStore:
    """Budgets and route health in Redis, shared by every router that uses the same keys.

    `url` takes redis-py's forms: `redis://[[user]:password@]host:port/db`, `rediss://`
    for TLS, `unix:///path/to.sock`. Keys live under `namespace`, by default
    `policy_router:<router name>` (the `name=` given to `Router`), so routers with the same
    name share one breaker and their budgets by budget name, and differently named routers
    share nothing. Each command has `timeout` seconds to connect and to be answered (one of
    `max_connections` pooled connections is waited for without limit); an unreachable Redis
    is tried again every `retry_every` seconds, in between not waited on at all (see the
    module docstring). A failed probe holder is forgotten after `probe_lease` seconds; a
    health record nobody touched for `keep_health` seconds after its rest expires.

    It promises no overshoot of a cap across processes when every call's bound is finite,
    one half-open probe at a time across processes, and that every write takes effect
    exactly once whatever is lost or repeated on the way: a reply lost after Redis ran the
    command, a Redis slower than `timeout`, a replay after an outage. An outcome that is
    unknown is resolved on the next contact, before anything is read: a reservation whose
    reply was lost is released by id (and a copy of it arriving late is refused), a probe
    whose claim was not confirmed is given back. `timeout` is the longest one command waits:
    a timeout is never retried (a broken connection is, once, which the ids make safe).
    A process killed during a call leaves that call's reservation held (the cap shrinks by
    it, it is never overshot) until `drop_reservations(budget)` is called while no process
    runs calls. Needs the `redis` extra (`pip install 'policy-router[redis]'`).

    A healthy call takes two round trips: its admission (health, rate slot, reservation)
    is one script and its settlement another (`admission.py`). With `cluster=True`, `url`
    names any node of a Redis Cluster: keys carry the namespace as a hash tag, so one
    router's keys share one slot (see `keyspace.py`); MOVED and ASK are followed, and a
    node that fails or a slot on the move is an outage like a server down (nothing is
    retried blind; writes wait by id and are made once the slot answers).
    """

    remote = True

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        namespace: str | None = None,
        timeout: float = 1.0,
        retry_every: float = 1.0,
        probe_lease: float = 300.0,
        keep_health: float = 86400.0,
        max_connections: int = 64,
        cluster: bool = False,
    ) -> None:
        options = checked_options(
            url, namespace, timeout, retry_every, probe_lease, keep_health, max_connections, cluster
        )
        self._link = Link(url, options, float(retry_every), cluster=cluster)
        self._explicit = namespace
        self.namespace = namespace or "policy_router:default"
        self._clock: Clock = MonotonicClock()
        self._probe_lease = float(probe_lease)
        self._keep = int(keep_health)
        self._local = InMemoryStore()
        self._keyed()
        self._recoveries = 0

    def _keyed(self) -> None:
        """Its key space and what lives in it, for its namespace and its own view."""
        self._keys = KeySpace(self.namespace, self._link, self._local)
        self._space = self._keys.space
        self._responses = RememberedResponses(self._keys, self._link, self._local)

    def bind(self, router: str, clock: Clock, emit: Callable[[object], None]) -> RedisStore:
        """A view for one router: its namespace (unless one was given), its clock, and its
        observers, which are told `StoreLost` and `StoreBack`."""
        self._link.observers.add(emit)
        view = copy.copy(self)
        view.namespace = self._explicit or f"policy_router:{router}"
        view._clock = clock
        view._local = InMemoryStore()
        view._keyed()
        return view

    # -- every key at once (keyspace.py), and who made each response (responses.py) -------
    reset_health = handed("_keys", KeySpace.reset_health)
    drop_reservations = handed("_keys", KeySpace.drop_reservations)
    clear = handed("_keys", KeySpace.clear)
    remember_response = handed("_responses", RememberedResponses.remember_response)
    aremember_response = handed("_responses", RememberedResponses.aremember_response)
    recall_response = handed("_responses", RememberedResponses.recall_response)
    arecall_response = handed("_responses", RememberedResponses.arecall_response)

    # -- budget ----------------------------------------------------------------------------
    # Each operation is written once as the commands it sends; the sync method runs them on
    # the sync client, its `a`-twin awaits them on the event loop's async client. Every
    # write is one idempotent script keyed by the reservation's id (see `budget.py`).
    def reserve(self, budget: str, hold: str, amount: int, cap: int | None) -> bool:
        return self.reserve_all(((budget, cap),), hold, amount) < 0

    async def areserve(self, budget: str, hold: str, amount: int, cap: int | None) -> bool:
        return await self.areserve_all(((budget, cap),), hold, amount) < 0

    def settle(self, budget: str, hold: str, cost: int, *, measured: bool, bounded: bool) -> None:
        self.settle_all((budget,), hold, cost, measured=measured, bounded=bounded)

    async def asettle(
        self, budget: str, hold: str, cost: int, *, measured: bool, bounded: bool
    ) -> None:
        await self.asettle_all((budget,), hold, cost, measured=measured, bounded=bounded)

    def release(self, budget: str, hold: str) -> None:
        self.release_all((budget,), hold)

    async def arelease(self, budget: str, hold: str) -> None:
        await self.arelease_all((budget,), hold)

    # A hold in several accounts at once, caps set live, the budget accounts there are, and
    # thresholds told once (keyspace.py).
    reserve_all = handed("_keys", KeySpace.reserve_all)
    areserve_all = handed("_keys", KeySpace.areserve_all)
    settle_all = handed("_keys", KeySpace.settle_all)
    asettle_all = handed("_keys", KeySpace.asettle_all)
    release_all = handed("_keys", KeySpace.release_all)
    arelease_all = handed("_keys", KeySpace.arelease_all)
    budget_accounts = handed("_keys", KeySpace.budget_accounts)
    budget_caps = handed("_keys", KeySpace.budget_caps)
    abudget_caps = handed("_keys", KeySpace.abudget_caps)
    set_budget_cap = handed("_keys", KeySpace.set_budget_cap)
    claim = handed("_keys", KeySpace.claim)
    aclaim = handed("_keys", KeySpace.aclaim)

    def spend_state(self, budget: str) -> SpendState:
        """The budget's state; raises StoreUnavailableError when Redis cannot be reached."""
        script = budget_script.spend_state(self._keys.budget_key(budget))
        return budget_script.decode(self._link.run(lambda r: r.eval(*script)))

    async def aspend_state(self, budget: str) -> SpendState:
        script = budget_script.spend_state(self._keys.budget_key(budget))
        return budget_script.decode(await self._link.arun(lambda r: r.eval(*script)))

    # -- one attempt's admission and settlement, one round trip each (admission.py) -------
    def admit(self, ask: Admission) -> Admitting:
        """Raises StoreUnavailableError when Redis cannot be reached (the gate gives back by
        id what a lost reply may have taken, then asks one step at a time)."""
        args = at_once.admit_args(self._space, ask)
        return at_once.admitted(self._link.run(lambda r: r.eval(*args)), self._clock, self._probe_lease)

    async def aadmit(self, ask: Admission) -> Admitting:
        args = at_once.admit_args(self._space, ask)
        reply = await self._link.arun(lambda r: r.eval(*args))
        return at_once.admitted(reply, self._clock, self._probe_lease)

    def conclude(self, done: Settlement) -> None:
        args = at_once.conclude_args(self._space, done)
        try:
            reply = self._link.run(lambda r: r.eval(*args))
        except StoreUnavailableError:
            return self._conclude_later(done)
        if done.change is not None and at_once.changes(done, reply, self._clock, self._probe_lease):
            self.update_health(done.route, done.change, token=done.token, op=done.op)

    async def aconclude(self, done: Settlement) -> None:
        args = at_once.conclude_args(self._space, done)
        try:
            reply = await self._link.arun(lambda r: r.eval(*args))
        except StoreUnavailableError:
            return self._conclude_later(done)
        if done.change is not None and at_once.changes(done, reply, self._clock, self._probe_lease):
            await self.aupdate_health(done.route, done.change, token=done.token, op=done.op)

    def _conclude_later(self, done: Settlement) -> None:
        # Budget and slot writes wait by id for Redis; the success is this process's view.
        for write in at_once.writes(self._space, done):
            self._link.defer(write)
        if done.change is not None:
            self._unconfirmed(self._update(done.route, done.change, done.token, done.op), done.change)

    @property
    def pending_writes(self) -> int:
        """Budget writes made during an outage and not yet written to Redis."""
        return len(self._link.backlog)

    # -- health ----------------------------------------------------------------------------
    def _local_view(self) -> InMemoryStore:
        # Records kept during an earlier outage are stale once Redis has answered again.
        if self._recoveries != self._link.recoveries:
            self._recoveries = self._link.recoveries
            self._local.reset_health()
        return self._local

    def _update(
        self, route: str, change: Callable[[Health], Health], token: str, op: str
    ) -> Update:
        return Update(
            Keys(self._space, route),
            change,
            token=token,
            op=op,
            clock=self._clock,
            probe_lease=self._probe_lease,
            keep=self._keep,
        )

    def _unconfirmed(self, update: Update, change: Callable[[Health], Health]) -> Health:
        """A health write Redis did not confirm: this process's view takes it, and a probe
        the attempt may hold in Redis is given back once Redis is reached."""
        if update.token and (update.claimed or update.op.endswith(_OUTCOMES)):
            self._link.defer(free_probe(update.keys, update.token))
        return self._local_view().update_health(update.keys.route, change)

    def health(self, route: str) -> Health:
        return self.all_health().get(route, Health())

    def update_health(
        self, route: str, change: Callable[[Health], Health], *, token: str = "", op: str = ""
    ) -> Health:
        update = self._update(route, change, token, op)
        try:
            return self._link.run(lambda r: run_update(r, update.steps()))
        except StoreUnavailableError:
            return self._unconfirmed(update, change)

    async def aupdate_health(
        self, route: str, change: Callable[[Health], Health], *, token: str = "", op: str = ""
    ) -> Health:
        update = self._update(route, change, token, op)
        try:
            return await self._link.arun(lambda r: arun_update(r, update.steps()))
        except StoreUnavailableError:
            return self._unconfirmed(update, change)

    # -- rate windows (see policies.limits and limits.py) ---------------------------------
    def take(self, route: str, slot: str, tokens: int, rpm: int | None, tpm: int | None) -> Window:
        """Raises StoreUnavailableError when Redis cannot be reached (the limit fails
        closed, as the budget does)."""
        args = take_args(self._space, route, slot, tokens, rpm, tpm)
        return decode_window(self._link.run(lambda r: r.eval(*args)))

    async def atake(
        self, route: str, slot: str, tokens: int, rpm: int | None, tpm: int | None
    ) -> Window:
        args = take_args(self._space, route, slot, tokens, rpm, tpm)
        return decode_window(await self._link.arun(lambda r: r.eval(*args)))

    def finish(self, route: str, slot: str, tokens: int | None) -> None:
        self._link.write(finish_write(self._space, route, slot, tokens, DONE_TTL))

    async def afinish(self, route: str, slot: str, tokens: int | None) -> None:
        await self._link.awrite(finish_write(self._space, route, slot, tokens, DONE_TTL))

    def close_window(self, route: str, seconds: float) -> None:
        self._link.write(close_args(self._space, route, seconds))

    async def aclose_window(self, route: str, seconds: float) -> None:
        await self._link.awrite(close_args(self._space, route, seconds))

    def windows(self, routes: list[str]) -> dict[str, Window]:
        args = windows_args(self._space, routes)
        return decode_windows(routes, self._link.run(lambda r: r.eval(*args)))

    async def awindows(self, routes: list[str]) -> dict[str, Window]:
        args = windows_args(self._space, routes)
        return decode_windows(routes, await self._link.arun(lambda r: r.eval(*args)))

    def defer(self, call: StoreCall) -> Any:
        """Make a write the deadline cut short once Redis is next reached (see
        `store.perform`): a budget write by its id; a health write in this process's view,
        with the attempt's probe given back in Redis."""
        if call.method == "settle":
            budget, hold, cost = call.args
            measured, bounded = call.kwargs["measured"], call.kwargs["bounded"]
            self._link.defer(
                budget_script.settle(self._keys.budget_key(budget), hold, cost, measured, bounded)
            )
            return None
        if call.method == "release":
            budget, hold = call.args
            self._link.defer(budget_script.release(self._keys.budget_key(budget), hold))
            return None
        if call.method == "settle_all":
            accounts, hold, cost = call.args
            measured, bounded = call.kwargs["measured"], call.kwargs["bounded"]
            self._link.defer(budget_script.settle(self._keys.keyed(accounts), hold, cost, measured, bounded))
            return None
        if call.method == "release_all":
            accounts, hold = call.args
            self._link.defer(budget_script.release(self._keys.keyed(accounts), hold))
            return None
        if call.method == "finish":
            route, slot, tokens = call.args
            self._link.defer(finish_write(self._space, route, slot, tokens, DONE_TTL))
            return None
        if call.method == "close_window":
            self._link.defer(close_args(self._space, *call.args))
            return None
        if call.method == "conclude":
            return self._conclude_later(*call.args)
        if call.method == "remember_response":
            self._local.remember_response(*call.args)
            return self._link.defer(self._responses.made_write(*call.args))
        if call.method == "update_health":
            route, change = call.args
            token = call.kwargs.get("token", "")
            if token:
                self._link.defer(free_probe(Keys(self._space, route), token))
            return self._local_view().update_health(route, change)
        raise ValueError(f"RedisStore.defer: {call.method} is not a write")

    def all_health(self) -> dict[str, Health]:
        args = (ALL, 1, self._keys.index, self._keys.health_key(""))
        try:
            reply = self._link.run(lambda r: r.eval(*args))
        except StoreUnavailableError:
            return self._local_view().all_health()
        return decode_all(reply, self._clock, self._probe_lease)

    async def aall_health(self) -> dict[str, Health]:
        args = (ALL, 1, self._keys.index, self._keys.health_key(""))
        try:
            reply = await self._link.arun(lambda r: r.eval(*args))
        except StoreUnavailableError:
            return self._local_view().all_health()
        return decode_all(reply, self._clock, self._probe_lease)

    def ping(self) -> float:
        """Seconds one round trip to Redis took; raises StoreUnavailableError."""
        start = time.perf_counter()
        self._link.run(lambda r: r.ping())
        return time.perf_counter() - start

    def close(self) -> None:
        """Write what an outage held back (one try), then close the sync connection pool.
        Views made by `bind` share it and close with it."""
        self._link.close()

    async def aclose(self) -> None:
        """`close`, and this event loop's async connections too."""
        await self._link.aclose()

    def __repr__(self) -> str:
        cluster = ", cluster=True" if self._link.cluster else ""
        return f"RedisStore({self._link.where!r}, namespace={self.namespace!r}{cluster})"
