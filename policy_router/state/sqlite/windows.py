"""Rate windows in SQLite: every slot a row, timed on the machine's clock.

The same windows as `state.windows.MemoryWindows` (a slot counts `WINDOW` seconds against
its route; a provider's 429 closes a route's window until its Retry-After), kept in tables
that every process on the machine reads and writes in transactions, so a route's rpm and
tpm hold across the server's workers. Times are seconds since the epoch (`time.time()`):
the clock every process of one machine shares.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..windows import WINDOW, Window

if TYPE_CHECKING:
    import sqlite3

__all__ = ["SCHEMA", "close_window", "finish", "forget_older", "take", "windows"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS rate_slots (
  route TEXT NOT NULL, slot TEXT NOT NULL, at REAL NOT NULL, tokens INTEGER NOT NULL,
  flying INTEGER NOT NULL, PRIMARY KEY (route, slot));
CREATE INDEX IF NOT EXISTS rate_slots_at ON rate_slots (route, at);
CREATE TABLE IF NOT EXISTS rate_done (
  route TEXT NOT NULL, slot TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (route, slot));
CREATE TABLE IF NOT EXISTS rate_closed (route TEXT PRIMARY KEY, until REAL NOT NULL);
"""


def _snapshot(db: sqlite3.Connection, route: str, now: float) -> Window:
    db.execute("DELETE FROM rate_slots WHERE route = ? AND at <= ?", (route, now - WINDOW))
    requests, tokens, flying, oldest = db.execute(
        "SELECT count(*), coalesce(sum(tokens), 0), coalesce(sum(flying), 0), min(at) "
        "FROM rate_slots WHERE route = ?", (route,),
    ).fetchone()
    closed = db.execute("SELECT until FROM rate_closed WHERE route = ?", (route,)).fetchone()
    return Window(
        requests=int(requests), tokens=int(tokens), in_flight=int(flying),
        frees_in=max(oldest + WINDOW - now, 0.0) if oldest is not None else 0.0,
        closed_for=max(closed[0] - now, 0.0) if closed else 0.0,
    )


def take(
    db: sqlite3.Connection, route: str, slot: str, tokens: int, rpm: int | None, tpm: int | None, now: float
) -> Window:
    """Take a slot if the window has room (see `Store.take`), in the caller's transaction."""
    seen = _snapshot(db, route, now)
    held = db.execute("SELECT 1 FROM rate_slots WHERE route = ? AND slot = ? AND flying = 1", (route, slot)).fetchone()
    done = db.execute("SELECT 1 FROM rate_done WHERE route = ? AND slot = ?", (route, slot)).fetchone()
    if held or done:
        return seen  # taken already (a replay): its window, once
    rpm_full = rpm is not None and seen.requests + 1 > rpm
    tpm_full = tpm is not None and seen.tokens + tokens > tpm
    if seen.closed_for > 0 or rpm_full or tpm_full:
        frees = seen.frees_in
        if tpm_full and not rpm_full and tpm is not None:
            frees = _room_in(db, route, seen.tokens, tokens, tpm, now)
        return Window(
            requests=seen.requests, tokens=seen.tokens, in_flight=seen.in_flight,
            frees_in=frees, closed_for=seen.closed_for, taken=False,
        )
    db.execute("INSERT INTO rate_slots VALUES (?, ?, ?, ?, 1)", (route, slot, now, tokens))
    return Window(
        requests=seen.requests + 1, tokens=seen.tokens + tokens, in_flight=seen.in_flight + 1,
        frees_in=seen.frees_in if seen.requests else WINDOW,
    )


def _room_in(db: sqlite3.Connection, route: str, have: int, need: int, tpm: int, now: float) -> float:
    """Seconds until `need` more tokens fit under `tpm` (`inf` if they never can)."""
    if need > tpm:
        return math.inf
    over = have + need - tpm
    for at, tokens in db.execute("SELECT at, tokens FROM rate_slots WHERE route = ? ORDER BY at", (route,)):
        over -= int(tokens)
        if over <= 0:
            return max(float(at) + WINDOW - now, 0.0)
    return 0.0


def finish(db: sqlite3.Connection, route: str, slot: str, tokens: int | None, now: float) -> None:
    """Settle a slot to the tokens billed, or give it back (None), once."""
    if db.execute("SELECT 1 FROM rate_done WHERE route = ? AND slot = ?", (route, slot)).fetchone():
        return
    db.execute("INSERT INTO rate_done VALUES (?, ?, ?)", (route, slot, now))
    forget_older(db, "rate_done", now - 2 * WINDOW)
    if tokens is None:
        db.execute("DELETE FROM rate_slots WHERE route = ? AND slot = ?", (route, slot))
    else:
        db.execute(
            "UPDATE rate_slots SET tokens = ?, flying = 0 WHERE route = ? AND slot = ?", (tokens, route, slot)
        )


def forget_older(db: sqlite3.Connection, table: str, cutoff: float) -> None:
    """Drop the rows of `table` (`rate_done`, `budget_done`) whose `at` is before `cutoff`.
    Rows are added in the order of their times, so the oldest come first by rowid: the scan
    stops at the first row to keep, reading only those it drops, with no index on `at` for
    every insert to write."""
    db.execute(
        f"DELETE FROM {table} WHERE rowid < coalesce("
        f"(SELECT rowid FROM {table} WHERE at >= ? ORDER BY rowid LIMIT 1), 0)",
        (cutoff,),
    )


def close_window(db: sqlite3.Connection, route: str, seconds: float, now: float) -> None:
    db.execute(
        "INSERT INTO rate_closed VALUES (?, ?) ON CONFLICT (route) DO UPDATE SET until = max(until, excluded.until)",
        (route, now + seconds),
    )


def windows(db: sqlite3.Connection, routes: Sequence[str], now: float) -> dict[str, Window]:
    return {route: _snapshot(db, route, now) for route in routes}
