"""The state store: spending and route health, behind one small interface.

Policies are immutable values; what changes (money spent and reserved, a route's
failures and rests) lives here. `InMemoryStore` serves one process and is thread- and
task-safe: every operation is one short critical section, and no lock is ever held across
a call to a provider. A shared store (Redis) implements the same methods so that many
processes share one budget and one breaker; nothing above the store knows which it has.

Every method is atomic: `reserve` checks the cap and reserves in one step, so concurrent
callers cannot both pass a check that only one of them fits. Every budget write names its
reservation by id and takes effect once: a reserve of an id already held, or a settle or
release of an id already settled or released, changes nothing. A write that is repeated
(a client retry, a replay after a lost reply) is therefore harmless.

The decision core does no I/O, not even to the store: the ledger, the health book and the
plan are generators that *yield* a `StoreCall` and are sent its result. `perform` runs them
against a store synchronously, `aperform` from async code, awaiting a remote store's async
methods (`areserve`, ...) so an event loop never waits on a socket. One core, two loops.

Given the request's deadline, both bound every wait on a remote store by the time left: a
read or a claim the deadline cuts short fails into the core as `StoreDeadline` (so the
request ends with `DeadlineExceededError`, nothing sent), and a write it cuts short is
handed to the store's `defer`, to be made when the store is next reached. Writes are
idempotent by id, so a write that was cut short but did arrive is not made twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..ground.errors import StoreUnavailableError

if TYPE_CHECKING:
    from ..ground.clock import Clock
    from ..ground.deadline import Deadline
    from .windows import Window

__all__ = [
    "FRESH",
    "Health",
    "StoreBack",
    "StoreLost",
    "SpendState",
    "Steps",
    "Store",
    "StoreCall",
    "StoreDeadline",
    "aperform",
    "perform",
]

T = TypeVar("T")


@dataclass(kw_only=True, frozen=True, slots=True)
class SpendState:
    """What a budget has spent and holds in reservation, in micro-units."""

    spent: int = 0
    reserved: int = 0
    calls: int = 0
    unmeasured: int = 0
    unbounded: int = 0
    holding: int = 0
    """How many reservations are held now (calls in flight)."""

    @classmethod
    def of_counts(cls, counts: Iterable[int]) -> SpendState:
        """The state from its counts in field order, as the stores keep them (missing
        trailing counts are 0)."""
        names = ("spent", "reserved", "calls", "unmeasured", "unbounded", "holding")
        return cls(**dict(zip(names, counts, strict=False)))


@dataclass(kw_only=True, frozen=True, slots=True)
class Health:
    """One route's health record, on the router's clock.

    `state` is "closed", "open" or "half_open". `rest_until` is when an open route may be
    probed, on the router's clock, and `rest_left` how long that is from when the record
    was read; `rest` is the length of the last rest (doubled on a failed probe); `probing`
    is True while one request holds the half-open probe.
    """

    state: str = "closed"
    """"closed" (asked), "open" (resting) or "half_open" (one probe may be sent)."""
    failures: int = 0
    """Consecutive failures counted toward a rest (a 429 rests without counting)."""
    rest_until: float = 0.0
    """When an open route may be probed, on the router's clock."""
    rest: float = 0.0
    """Seconds of the last rest (doubled on a failed probe, up to `max_cooldown`)."""
    probing: bool = False
    """True while one request holds the half-open probe."""
    last_error: str = ""
    """The provider's text of the last failure, every secret redacted."""
    opened: int = 0
    """How many outages the route has had: rests begun while it was closed."""
    rest_left: float = field(default=0.0, compare=False)
    """Seconds of rest left when the record was read by `router.health()` (0.0 when the
    route may be tried); the stores keep `rest_until`, on the router's clock."""


@dataclass(frozen=True, slots=True)
class StoreLost:
    """Told to observers once per outage: a shared store stopped answering.

    Until `StoreBack`, budgets refuse every call and health is this process's own view.
    `store` is its address without a password; `error` what the client said.
    """

    store: str
    error: str


@dataclass(frozen=True, slots=True)
class StoreBack:
    """Told to observers when a shared store answers again after `after` seconds."""

    store: str
    after: float


@dataclass(frozen=True, slots=True)
class StoreCall:
    """One store operation the decision core asks for: a `Store` method and its arguments.

    `write` marks a call whose result the request need not wait for (a settle, a release,
    an outcome's health record): under a deadline it may be deferred, never dropped.
    """

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    write: bool = False


FRESH = Health()
"""A route's record before anything happened to it (one shared value: records are frozen)."""


class StoreDeadline(StoreUnavailableError):
    """The request's deadline passed while it waited on the store."""


# A step of the decision core: yields StoreCalls, is sent their results, returns a T.
Steps = Generator[StoreCall, Any, T]

# Sync store calls under a deadline run here, so the caller stops waiting at the deadline
# (a socket timeout cannot be set per command); threads are made only as calls need them.
_WAITERS = ThreadPoolExecutor(max_workers=32, thread_name_prefix="policy_router-store")


def perform(store: Store, steps: Steps[T], deadline: Deadline | None = None) -> T:
    """Run `steps` to the end against `store`, in this thread.

    A store's exception is thrown into the steps at the yield that asked for it, so the
    core handles it where it happened (the budget turns an unreachable store into a skip).
    With a `deadline`, each wait on a remote store is bounded by the time left (see the
    module docstring).
    """
    outcome: tuple[Any, Exception | None] = (None, None)
    while not isinstance(call := _resume(steps, outcome), _Done):
        try:
            method = getattr(store, call.method)
            if deadline is None or not store.remote:
                outcome = (method(*call.args, **call.kwargs), None)
                continue
            left = deadline.left()
            if left <= 0:
                outcome = (_too_late(store, call, left), None)
                continue
            future = _WAITERS.submit(method, *call.args, **call.kwargs)
            try:
                outcome = (future.result(timeout=left), None)
            except FutureTimeout:
                outcome = (_too_late(store, call, left), None)
        except Exception as exc:
            outcome = (None, exc)
    return call.value  # type: ignore[no-any-return]


async def aperform(store: Store, steps: Steps[T], deadline: Deadline | None = None) -> T:
    """`perform` for async code: a remote store's `a<method>` is awaited (bounded by the
    deadline, when given); an in-process store's method is called directly (a few dict
    operations under a lock)."""
    if not store.remote:
        return perform(store, steps)
    outcome: tuple[Any, Exception | None] = (None, None)
    while not isinstance(call := _resume(steps, outcome), _Done):
        try:
            method = getattr(store, "a" + call.method)
            if deadline is None:
                outcome = (await method(*call.args, **call.kwargs), None)
                continue
            left = deadline.left()
            try:
                if left <= 0:
                    raise TimeoutError
                async with asyncio.timeout(left):
                    outcome = (await method(*call.args, **call.kwargs), None)
            except TimeoutError:
                outcome = (_too_late(store, call, left), None)
        except Exception as exc:
            outcome = (None, exc)
    return call.value  # type: ignore[no-any-return]


def _too_late(store: Store, call: StoreCall, waited: float) -> Any:
    """A call the deadline cut short: a write is deferred to the store, a read fails."""
    if call.write:
        return store.defer(call)
    raise StoreDeadline(
        f"the request's deadline passed while waiting {max(waited, 0.0):.2f} s on the "
        f"store's {call.method}"
    )


@dataclass(frozen=True, slots=True)
class _Done:
    value: Any


def _resume(steps: Steps[Any], outcome: tuple[Any, Exception | None]) -> StoreCall | _Done:
    """Give the steps the last call's result (or throw its error in): the next call they
    ask for, or what they returned."""
    result, error = outcome
    try:
        return steps.throw(error) if error is not None else steps.send(result)
    except StopIteration as done:
        return _Done(done.value)


class Store(Protocol):
    """What the router needs from a state store. Every method is atomic.

    `remote` is True for a store reached over the network. Such a store also has async
    twins of the methods the decision core calls (`areserve`, `asettle`, `arelease`,
    `aspend_state`, `aupdate_health`, `aall_health`), which `aperform` awaits.
    `bind` is called once by each router with its name, its clock and its observers; a
    store returns itself or a view scoped to that router (a shared store namespaces its
    keys by the name, converts its own clock's times to the router's, and tells the
    observers when it is lost and back with `StoreLost` and `StoreBack`).
    """

    remote: bool

    def bind(self, router: str, clock: Clock, emit: Callable[[object], None]) -> Store:
        """The store as one router sees it: itself, or a view scoped to the router."""
        ...

    def reserve(self, budget: str, hold: str, amount: int, cap: int | None) -> bool:
        """Hold `amount` under the id `hold` if spent + reserved + amount stays within `cap`
        (None: no cap). True when `hold` is held after the call (also when it already was);
        False when it does not fit, or when `hold` was already settled or released."""
        ...

    def settle(self, budget: str, hold: str, cost: int, *, measured: bool, bounded: bool) -> None:
        """Replace the reservation `hold` by the call's cost and count the call, once.

        A `hold` that was never held (an unpriced call) is counted with nothing to free; one
        already settled or released changes nothing."""
        ...

    def release(self, budget: str, hold: str) -> None:
        """Give the reservation `hold` back (the call cost nothing), once. Releasing an id
        that is not held yet makes a later reserve of it a no-op."""
        ...

    def reserve_all(self, accounts: Sequence[tuple[str, int | None]], hold: str, amount: int) -> int:
        """`reserve` in every (budget, cap) of `accounts` at once, or in none: -1 when
        `hold` is held in all of them after the call, else the index of the first that
        refused (it does not fit, or `hold` was settled or released there)."""
        ...

    def settle_all(self, accounts: Sequence[str], hold: str, cost: int, *, measured: bool, bounded: bool) -> None:
        """`settle` in every one of `accounts`, in one operation."""
        ...

    def release_all(self, accounts: Sequence[str], hold: str) -> None:
        """`release` in every one of `accounts`, in one operation."""
        ...

    def spend_state(self, budget: str) -> SpendState: ...

    def budget_accounts(self) -> list[str]:
        """Every budget account the store holds (each scope in each period it spent in)."""
        ...

    def budget_caps(self) -> dict[str, str]:
        """The caps set live, by scope: each the JSON of its budget's fields."""
        ...

    def set_budget_cap(self, scope: str, cap: str | None) -> None:
        """Set the live cap of `scope` (None: remove it), for every process sharing the store."""
        ...

    def claim(self, name: str, seconds: float) -> bool:
        """True for the first claim of `name` within `seconds`, across every process
        sharing the store (a threshold is told once)."""
        ...

    def health(self, route: str) -> Health: ...

    def update_health(
        self, route: str, change: Callable[[Health], Health], *, token: str = "", op: str = ""
    ) -> Health:
        """Apply `change` to a route's record atomically and return the new record.

        `token` names the attempt on whose behalf the write is made (it owns a probe it
        claims); `op` names the write itself, which a shared store applies once however
        often it is repeated.
        """
        ...

    def defer(self, call: StoreCall) -> Any:
        """Make the write `call` later, when the store is next reached, without waiting;
        return what this process's view says meanwhile. Only remote stores are asked."""
        ...

    def take(
        self, route: str, slot: str, tokens: int, rpm: int | None, tpm: int | None
    ) -> Window:
        """Take a rate slot for `route` if its window has room (see `policies.limits`); return
        the route's `Window`, whose `taken` says whether it did. Once per slot id."""
        ...

    def finish(self, route: str, slot: str, tokens: int | None) -> None:
        """Settle a slot to the tokens billed, or give it back (`tokens` None), once."""
        ...

    def close_window(self, route: str, seconds: float) -> None:
        """Take no slot for `route` for `seconds` (a provider's 429 named its reset)."""
        ...

    def windows(self, routes: list[str]) -> dict[str, Window]:
        """Every named route's `Window` now."""
        ...

    def all_health(self) -> dict[str, Health]: ...

    def reset_health(self, route: str | None = None) -> None: ...

    # Optional: `admit(Admission) -> Admitting` and `conclude(Settlement) -> None` (with
    # `aadmit`/`aconclude` on a remote store) do an attempt's admission and its settlement
    # in one operation each, which a shared store makes one round trip. A store without
    # them is asked one method at a time; `admit_in_turn` and `conclude_in_turn` are those
    # same steps, for a store that wants the names.

    def remember_response(self, response: str, route: str, on_device: bool, seconds: float) -> None:
        """Remember for `seconds` that the route whose id is `route` made `response`."""
        ...

    def recall_response(self, response: str) -> tuple[str, bool] | None:
        """The route id that made `response` and whether it was on the device, or None."""
        ...


