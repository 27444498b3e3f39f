"""The store on disk: SQLite (the standard library's `sqlite3`, WAL), shared by every
process of one machine and kept across restarts.

Every operation of the store protocol (budgets and their caps set live, breaker health,
rate windows, which route made each response, thresholds told once) is one transaction,
`BEGIN IMMEDIATE` where it writes, so concurrent processes serialize on the file and a
reservation against several accounts is taken in all of them or in none. A restart finds
every scope's spending of its period, the routes that rest, and the windows as they were.

A reservation left held by a process that died mid-call is settled at its worst case once
its lease has passed (`lease`, an hour by default: longer than any call's deadline should
be; writes look for such holds at most once a second, every read of an account's state
looks): the safe side, since the request may have been billed; it is never held forever
and never released as unspent. The times the store keeps are the machine's calendar time
(`time.time()`), which every process shares; health records are converted to and from each
router's own clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...ground.clock import MonotonicClock
from ...ground.errors import ConfigError
from ..admission import Admission, Admitting, Settlement, admit_in_turn, conclude_in_turn
from ..store import Health, SpendState, StoreCall
from . import record, sql
from . import windows as rate
from .connections import Connections, Transaction
from .unsettled import Unsettled

if TYPE_CHECKING:
    import sqlite3

    from ...ground.clock import Clock
    from ..windows import Window

__all__ = ["SQLiteStore"]

# Seconds a settled or released id is remembered, so a replay changes nothing (one comes
# within seconds); then it is dropped, or a store that only settles would keep every id.
_DONE_KEEP = 86400.0

# Seconds between two scans for holds whose lease has passed, made by a write (`_expire`).
_EXPIRE_EVERY = 1.0

class SQLiteStore:
    """The store in a SQLite file (see the module docstring).

    Args:
        path: The file (created with its tables when missing); `:memory:` is refused, since
            it would be neither shared nor kept.
        lease: Seconds a reservation may stay held before it is settled at its worst case
            (the process that held it died mid-call). At least the longest deadline.
        timeout: Seconds an operation waits for another process's transaction to end.
        probe_lease: Seconds a half-open probe stays claimed by an attempt that never said
            how it ended.
        settle_within: Seconds an answered call's settlement may wait to be written with
            this process's next transaction (0, the default: written at once). Saves a
            write transaction a call under traffic; until written, the call's hold stays
            held (the safe side), and another process reads it so for at most this long
            (see `unsettled`). `policy-router serve` sets it for the store it keeps.

    Raises:
        ConfigError: the path cannot be opened as a database, or a number is wrong.
    """

    remote = False
    blocking = True
    """Its operations wait on a file: live caps are read by a thread of their own."""

    def __init__(
        self,
        path: str | Path,
        *,
        lease: float = 3600.0,
        timeout: float = 5.0,
        probe_lease: float = 300.0,
        settle_within: float = 0.0,
    ) -> None:
        if str(path) in ("", ":memory:"):
            raise ConfigError("SQLiteStore needs a file path; a memory database is neither shared nor kept")
        for name, value in (("lease", lease), ("timeout", timeout), ("probe_lease", probe_lease)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise ConfigError(f"SQLiteStore {name} must be seconds > 0, got {value!r}")
        if (
            isinstance(settle_within, bool) or not isinstance(settle_within, int | float)
            or not 0 <= settle_within <= min(60.0, lease / 2)
        ):
            raise ConfigError(
                f"SQLiteStore settle_within must be seconds from 0 to 60 (and at most half the lease), "
                f"got {settle_within!r}"
            )
        self.path = Path(path)
        self.lease = float(lease)
        self._probe_lease = float(probe_lease)
        self._forget_at = self._expire_at = 0.0
        self._clock: Clock = MonotonicClock()
        self._db = Connections(self.path, float(timeout))
        self._unsettled = Unsettled(float(settle_within))
        try:
            self._db.connection().executescript(sql.SCHEMA)
        except (self._db.error, OSError) as error:
            raise ConfigError(f"SQLiteStore {self.path}: cannot use it as the store ({error})") from None

    def _tx(self, write: bool = True) -> Transaction:
        """One transaction (joined by any operation inside it, as `admit` does), its errors
        raised as `StoreUnavailableError`. The settlements waiting (`settle_within`) are
        written in it first, so nothing this process reads counts a settled call as held."""
        if self._unsettled.items and not self._db.in_transaction():
            return self._db.transaction(True, self._unsettled)
        return self._db.transaction(write)

    def settle_waiting(self) -> None:
        """Write the settlements waiting (`settle_within`) now, in a transaction of their
        own; nothing when none wait."""
        if self._unsettled.items:
            with self._tx():
                pass

    def bind(self, router: str, clock: Clock, emit: Callable[[object], None]) -> SQLiteStore:
        """The store as one router sees it: its own clock (the file is one namespace: give
        each router its own file, or one name)."""
        view = object.__new__(SQLiteStore)
        view.__dict__.update(self.__dict__)
        view._clock = clock
        return view

    # -- budgets ---------------------------------------------------------------------------
    def reserve(self, budget: str, hold: str, amount: int, cap: int | None) -> bool:
        return self.reserve_all(((budget, cap),), hold, amount) < 0

    def reserve_all(self, accounts: Sequence[tuple[str, int | None]], hold: str, amount: int) -> int:
        now = time.time()
        with self._tx() as db:
            self._expire(db, now)
            fresh = []
            for i, (name, cap) in enumerate(accounts):
                held, done, used = db.execute(sql.ACCOUNT, (name, hold)).fetchone()
                if held:
                    continue  # held already (a replay)
                if done or (cap is not None and used + amount > cap):
                    return i
                fresh.append(name)
            for name in fresh:
                db.execute(sql.HOLD, (name, amount))
                db.execute("INSERT INTO budget_holds VALUES (?, ?, ?, ?)", (name, hold, amount, now + self.lease))
            return -1

    def settle(self, budget: str, hold: str, cost: int, *, measured: bool, bounded: bool) -> None:
        self.settle_all((budget,), hold, cost, measured=measured, bounded=bounded)

    def settle_all(self, accounts: Sequence[str], hold: str, cost: int, *, measured: bool, bounded: bool) -> None:
        now = time.time()
        with self._tx() as db:
            self._expire(db, now)
            for name in accounts:
                if not self._done(db, name, hold, now):
                    continue
                held = self._unhold(db, name, hold)
                if held is not None and held[1] < now:  # its lease passed before this settle came
                    self._charge_worst(db, name, held[0])
                else:
                    self._charge(db, name, held[0] if held else 0, cost, measured, bounded)
            self._forget_done(db, now)

    def _charge(self, db: sqlite3.Connection, name: str, held: int, cost: int, measured: bool, bounded: bool) -> None:
        """Charge `cost` to `name` and give back the `held` amount its hold reserved."""
        db.execute(sql.CHARGE, (name, cost, int(not measured), int(not bounded), -held))

    def _charge_worst(self, db: sqlite3.Connection, name: str, held: int) -> None:
        """Charge a hold whose lease passed at its worst case, `held` (unmeasured): its
        process may have died mid-call, and the request may have been billed. A late settle
        or release of it is charged so too (never released as unspent), as `_expire` would
        have charged it first."""
        self._charge(db, name, held, held, False, True)

    def _unhold(self, db: sqlite3.Connection, name: str, hold: str) -> tuple[int, float] | None:
        """Drop `hold` from `name`: what it held and when its lease ends, or None (not
        `DELETE ... RETURNING`, which needs SQLite 3.35, newer than some systems' Python
        links)."""
        row = db.execute(
            "SELECT amount, expires FROM budget_holds WHERE name = ? AND hold = ?", (name, hold)
        ).fetchone()
        if row is None:
            return None
        db.execute("DELETE FROM budget_holds WHERE name = ? AND hold = ?", (name, hold))
        return int(row[0]), float(row[1])

    def _done(self, db: sqlite3.Connection, name: str, hold: str, now: float) -> bool:
        """Mark `hold` done in `name`; False when it was already (a repeated write)."""
        found = db.execute("INSERT INTO budget_done VALUES (?, ?, ?) ON CONFLICT DO NOTHING", (name, hold, now))
        return found.rowcount == 1

    def release(self, budget: str, hold: str) -> None:
        self.release_all((budget,), hold)

    def release_all(self, accounts: Sequence[str], hold: str) -> None:
        now = time.time()
        with self._tx() as db:
            self._expire(db, now)
            for name in accounts:
                self._done(db, name, hold, now)
                held = self._unhold(db, name, hold)
                if held is None:
                    continue
                if held[1] < now:  # its lease passed before this release came
                    self._charge_worst(db, name, held[0])
                else:
                    db.execute("UPDATE budget SET reserved = reserved - ? WHERE name = ?", (held[0], name))
            self._forget_done(db, now)

    def _forget_done(self, db: sqlite3.Connection, now: float) -> None:
        """Drop the ids settled more than `_DONE_KEEP` ago, at most once a minute: they are
        kept a day, so asking at every settle would only read the table's first row again."""
        if now >= self._forget_at:
            self._forget_at = now + 60.0
            rate.forget_older(db, "budget_done", now - _DONE_KEEP)

    def _expire(self, db: sqlite3.Connection, now: float, *, always: bool = False) -> None:
        """Settle at their worst case the holds whose lease has passed: their process died
        mid-call, and the request may have been billed. A settle of one arriving later
        changes nothing.

        Writes scan at most once every `_EXPIRE_EVERY` seconds (a read of an account's
        state, `always`): a hold past its lease weighs on its cap as much held as charged,
        and a settle or release that finds one charges its worst case itself,
        so a scan at every write would change no decision, only what it costs."""
        if not always and now < self._expire_at:
            return
        self._expire_at = now + _EXPIRE_EVERY
        for name, hold, amount in db.execute(
            "SELECT name, hold, amount FROM budget_holds WHERE expires < ?", (now,)
        ).fetchall():
            if self._done(db, name, hold, now):
                db.execute("DELETE FROM budget_holds WHERE name = ? AND hold = ?", (name, hold))
                self._charge_worst(db, name, amount)

    def spend_state(self, budget: str) -> SpendState:
        now = time.time()
        with self._tx() as db:
            self._expire(db, now, always=True)
            row = db.execute(
                "SELECT spent, reserved, calls, unmeasured, unbounded FROM budget WHERE name = ?", (budget,)
            ).fetchone()
            holding = db.execute("SELECT count(*) FROM budget_holds WHERE name = ?", (budget,)).fetchone()[0]
        return SpendState.of_counts([*(row or (0, 0, 0, 0, 0)), holding])

    def budget_accounts(self) -> list[str]:
        with self._tx(write=False) as db:
            return [name for (name,) in db.execute("SELECT name FROM budget")]

    def budget_caps(self) -> dict[str, str]:
        with self._tx(write=False) as db:
            return dict(db.execute("SELECT scope, cap FROM budget_caps").fetchall())

    def set_budget_cap(self, scope: str, cap: str | None) -> None:
        with self._tx() as db:
            if cap is None:
                db.execute("DELETE FROM budget_caps WHERE scope = ?", (scope,))
            else:
                db.execute(
                    "INSERT INTO budget_caps VALUES (?, ?) ON CONFLICT (scope) DO UPDATE SET cap = excluded.cap",
                    (scope, cap),
                )

    def claim(self, name: str, seconds: float) -> bool:
        now = time.time()
        with self._tx() as db:
            db.execute("DELETE FROM claims WHERE until < ?", (now,))
            return db.execute(
                "INSERT INTO claims VALUES (?, ?) ON CONFLICT DO NOTHING", (name, now + seconds)
            ).rowcount == 1

    # -- one attempt's admission and settlement, one transaction each ---------------------
    def admit(self, ask: Admission) -> Admitting:
        with self._tx():
            return admit_in_turn(self, ask)

    def conclude(self, done: Settlement) -> None:
        if self._unsettled.defer(self, done, self.settle_waiting):
            return
        with self._tx():
            conclude_in_turn(self, done)

    def defer(self, call: StoreCall) -> Any:
        # Nothing here waits on a network: a deferred write is simply made now.
        return getattr(self, call.method)(*call.args, **call.kwargs)

    # -- health, on the router's clock ------------------------------------------------------
    def _offset(self) -> float:
        """Seconds from the router's clock to the calendar's, now."""
        return time.time() - self._clock.now()

    def health(self, route: str) -> Health:
        with self._tx(write=False) as db:
            row = db.execute("SELECT record FROM health WHERE route = ?", (route,)).fetchone()
        return record.read(row[0] if row else None, self._offset(), time.time(), self._probe_lease)

    def update_health(
        self, route: str, change: Callable[[Health], Health], *, token: str = "", op: str = ""
    ) -> Health:
        now, offset = time.time(), self._offset()
        with self._tx() as db:
            row = db.execute("SELECT record FROM health WHERE route = ?", (route,)).fetchone()
            old = record.read(row[0] if row else None, offset, now, self._probe_lease)
            new = change(old)
            # Most changes change nothing (a closed breaker's admit, a healthy route's
            # success): the record stays as it is, with no write for every request.
            if row is None or new != old:
                probe_at = 0.0
                if new.probing:
                    probe_at = record.probe_at(row[0], now) if row and old.probing else now
                db.execute(
                    "INSERT INTO health VALUES (?, ?) ON CONFLICT (route) DO UPDATE SET record = excluded.record",
                    (route, record.text(new, offset, probe_at)),
                )
        return new if new.rest_left == 0.0 else replace(new, rest_left=0.0)

    def all_health(self) -> dict[str, Health]:
        now, offset = time.time(), self._offset()
        with self._tx(write=False) as db:
            rows = db.execute("SELECT route, record FROM health").fetchall()
        return {route: record.read(text, offset, now, self._probe_lease) for route, text in rows}

    def reset_health(self, route: str | None = None) -> None:
        """Forget health records (and the close a 429 put on a window), for every process."""
        with self._tx() as db:
            if route is None:
                db.execute("DELETE FROM health")
                db.execute("DELETE FROM rate_closed")
            else:
                db.execute("DELETE FROM health WHERE route = ?", (route,))
                db.execute("DELETE FROM rate_closed WHERE route = ?", (route,))

    # -- rate windows (windows.py) ----------------------------------------------------------
    def take(self, route: str, slot: str, tokens: int, rpm: int | None, tpm: int | None) -> Window:
        with self._tx() as db:
            return rate.take(db, route, slot, tokens, rpm, tpm, time.time())

    def finish(self, route: str, slot: str, tokens: int | None) -> None:
        with self._tx() as db:
            rate.finish(db, route, slot, tokens, time.time())

    def close_window(self, route: str, seconds: float) -> None:
        with self._tx() as db:
            rate.close_window(db, route, seconds, time.time())

    def windows(self, routes: list[str]) -> dict[str, Window]:
        with self._tx() as db:
            return rate.windows(db, routes, time.time())

    # -- which route made each response -----------------------------------------------------
    def remember_response(self, response: str, route: str, on_device: bool, seconds: float) -> None:
        now = time.time()
        with self._tx() as db:
            db.execute(
                "INSERT INTO responses VALUES (?, ?, ?, ?) ON CONFLICT (response) DO UPDATE SET "
                "route = excluded.route, on_device = excluded.on_device, until = excluded.until",
                (response, route, int(on_device), now + seconds),
            )

    def recall_response(self, response: str) -> tuple[str, bool] | None:
        with self._tx(write=False) as db:
            row = db.execute(
                "SELECT route, on_device FROM responses WHERE response = ? AND until >= ?", (response, time.time())
            ).fetchone()
        return None if row is None else (str(row[0]), bool(row[1]))

    def close(self) -> None:
        """Write the settlements waiting, then close this thread's connection (others
        close with their threads)."""
        try:
            self.settle_waiting()
        finally:
            self._db.close()

    def __repr__(self) -> str:
        within = self._unsettled.within
        return f"SQLiteStore({str(self.path)!r}, lease={self.lease:g}" + (f", settle_within={within:g})" if within else ")")
