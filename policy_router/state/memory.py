"""The default store: one process, thread- and task-safe, no lock held across a call.

Every method is one short critical section; budget writes are keyed by their
reservation's id and take effect once (see `state.store` for the contract it keeps).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cachetools import LRUCache, TTLCache

from .admission import Admission, Admitting, Settlement, admit_in_turn, conclude_in_turn
from .store import FRESH, Health, SpendState, StoreCall
from .windows import MemoryWindows, Window

if TYPE_CHECKING:
    from ..ground.clock import Clock

__all__ = ['InMemoryStore']


class InMemoryStore:
    """The default store: one process, thread- and task-safe, nothing held across a call.

    Several routers may share one instance; they then share budgets by budget name and
    health records by route name. Nothing survives the process.
    """

    remote = False
    _windows: MemoryWindows | None

    def bind(self, router: str, clock: Clock, emit: Callable[[object], None]) -> InMemoryStore:
        # The windows run on the first router's clock (a test's manual clock included).
        if self._windows is None:
            from .windows import MemoryWindows

            self._windows = MemoryWindows(clock)
        return self

    def _rates(self) -> MemoryWindows:
        if self._windows is None:  # used without a router: on the monotonic clock
            from ..ground.clock import MonotonicClock
            from .windows import MemoryWindows

            self._windows = MemoryWindows(MonotonicClock())
        return self._windows

    def take(
        self, route: str, slot: str, tokens: int, rpm: int | None, tpm: int | None
    ) -> Window:
        return self._rates().take(route, slot, tokens, rpm, tpm)

    def finish(self, route: str, slot: str, tokens: int | None) -> None:
        self._rates().finish(route, slot, tokens)

    def close_window(self, route: str, seconds: float) -> None:
        self._rates().close_window(route, seconds)

    def windows(self, routes: list[str]) -> dict[str, Window]:
        return self._rates().windows(routes)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spend: dict[str, list[int]] = {}  # SpendState's fields, counted in place
        self._holds: dict[tuple[str, str], int] = {}
        # Ids settled or released lately, so a repeated write is a no-op; in one process
        # nothing is ever repeated, but the store keeps the same promise as a shared one.
        self._done: LRUCache[tuple[str, str], bool] = LRUCache(maxsize=4096)
        self._health: dict[str, Health] = {}
        self._windows = None
        # Which route made each response (Responses continuity), for as long as the
        # provider keeps it, the oldest forgotten first past this many.
        self._made: TTLCache[str, tuple[str, bool]] = TTLCache(maxsize=100_000, ttl=30 * 24 * 3600)
        self._caps: dict[str, str] = {}  # caps set live, by scope
        self._claims: LRUCache[str, bool] = LRUCache(maxsize=100_000)  # thresholds told

    def remember_response(self, response: str, route: str, on_device: bool, seconds: float) -> None:
        with self._lock:
            self._made[response] = (route, on_device)

    def recall_response(self, response: str) -> tuple[str, bool] | None:
        with self._lock:
            return self._made.get(response)

    def _account(self, budget: str) -> list[int]:
        account = self._spend.get(budget)
        if account is None:
            account = self._spend[budget] = [0, 0, 0, 0, 0, 0]
        return account

    # A hold in one account is `reserve`/`settle`/`release`, in several the `_all` methods
    # (`Store`): a hold in one account goes through the one-account method, so a subclass
    # that watches those sees every budget write.
    def reserve(self, budget: str, hold: str, amount: int, cap: int | None) -> bool:
        return self._reserve(((budget, cap),), hold, amount) < 0

    def reserve_all(self, accounts: Sequence[tuple[str, int | None]], hold: str, amount: int) -> int:
        if len(accounts) == 1:
            (budget, cap), = accounts
            return -1 if self.reserve(budget, hold, amount, cap) else 0
        return self._reserve(accounts, hold, amount)

    def _reserve(self, accounts: Sequence[tuple[str, int | None]], hold: str, amount: int) -> int:
        with self._lock:
            fresh = []
            for i, (budget, cap) in enumerate(accounts):
                key = (budget, hold)
                if key in self._holds:
                    continue  # held already (a replay): held in this account
                account = self._account(budget)
                if key in self._done or (cap is not None and account[0] + account[1] + amount > cap):
                    return i
                fresh.append((key, account))
            for key, account in fresh:
                self._holds[key] = amount
                account[1] += amount
                account[5] += 1
            return -1

    def settle(self, budget: str, hold: str, cost: int, *, measured: bool, bounded: bool) -> None:
        self._settle((budget,), hold, cost, measured, bounded)

    def settle_all(self, accounts: Sequence[str], hold: str, cost: int, *, measured: bool, bounded: bool) -> None:
        if len(accounts) == 1:
            self.settle(accounts[0], hold, cost, measured=measured, bounded=bounded)
        else:
            self._settle(accounts, hold, cost, measured, bounded)

    def _settle(self, accounts: Sequence[str], hold: str, cost: int, measured: bool, bounded: bool) -> None:
        with self._lock:
            for budget in accounts:
                key = (budget, hold)
                if key in self._done:
                    continue
                self._done[key] = True
                amount = self._holds.pop(key, None)
                account = self._account(budget)
                account[0] += cost
                account[2] += 1
                account[3] += not measured
                account[4] += not bounded
                if amount is not None:
                    account[1] -= amount
                    account[5] -= 1

    def release(self, budget: str, hold: str) -> None:
        self._release((budget,), hold)

    def release_all(self, accounts: Sequence[str], hold: str) -> None:
        if len(accounts) == 1:
            self.release(accounts[0], hold)
        else:
            self._release(accounts, hold)

    def _release(self, accounts: Sequence[str], hold: str) -> None:
        with self._lock:
            for budget in accounts:
                key = (budget, hold)
                self._done[key] = True
                amount = self._holds.pop(key, None)
                if amount is not None:
                    account = self._account(budget)
                    account[1] -= amount
                    account[5] -= 1

    def budget_accounts(self) -> list[str]:
        """Every budget account this store has (each scope in each period it spent in)."""
        with self._lock:
            return list(self._spend)

    def budget_caps(self) -> dict[str, str]:
        """The caps set live, by scope (see `Store.budget_caps`)."""
        with self._lock:
            return dict(self._caps)

    def set_budget_cap(self, scope: str, cap: str | None) -> None:
        with self._lock:
            if cap is None:
                self._caps.pop(scope, None)
            else:
                self._caps[scope] = cap

    def claim(self, name: str, seconds: float) -> bool:
        """True the first time `name` is claimed in `seconds` (a threshold told once)."""
        with self._lock:
            if name in self._claims:
                return False
            self._claims[name] = True
            return True

    def spend_state(self, budget: str) -> SpendState:
        with self._lock:
            return SpendState.of_counts(self._spend.get(budget, ()))

    def health(self, route: str) -> Health:
        # One dict read is atomic: no lock (every write replaces a whole record).
        return self._health.get(route, FRESH)

    def update_health(
        self, route: str, change: Callable[[Health], Health], *, token: str = "", op: str = ""
    ) -> Health:
        with self._lock:
            new = change(self._health.get(route, FRESH))
            self._health[route] = new
            return new

    def admit(self, ask: Admission) -> Admitting:
        """An attempt's admission (see `Store`): the same steps as one at a time."""
        return admit_in_turn(self, ask)

    def conclude(self, done: Settlement) -> None:
        """An attempt's settlement (see `Store`): the same steps as one at a time."""
        conclude_in_turn(self, done)

    def defer(self, call: StoreCall) -> Any:
        # Nothing here waits on a network: a deferred write is simply made now.
        return getattr(self, call.method)(*call.args, **call.kwargs)

    def all_health(self) -> dict[str, Health]:
        with self._lock:
            return dict(self._health)

    def reset_health(self, route: str | None = None) -> None:
        """Forget health records, and the close a provider's 429 put on a rate window."""
        with self._lock:
            if route is None:
                self._health.clear()
            else:
                self._health.pop(route, None)
        if self._windows is not None:
            self._windows.reopen(route)

    def __repr__(self) -> str:
        return f"InMemoryStore({len(self._spend)} budgets, {len(self._health)} routes)"
