"""Observation: every decision goes to observers as a frozen record.

The records are the journey's own `Skip`, `Attempt` and `Waited`, the breaker's
`RestOpened` and `RestClosed`, and a shared store's `StoreLost` and `StoreBack`. An observer
is any callable taking one record; it must not raise (an observer that does is reported
once and otherwise ignored: observing never fails a call).
The default, `LogObserver`, writes loguru lines under the `policy_router` name, which the
package disables on import: `logger.enable("policy_router")` turns them on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from loguru import logger

from ..core.journey import Attempt, Waited
from ..ground.records import Skip
from ..policies.accounts import BudgetThreshold
from ..policies.breaker import RestClosed, RestOpened, denied_at_preflight
from ..state.store import StoreBack, StoreLost

__all__ = [
    "AttemptLog",
    "LogObserver",
    "Observer",
    "fan_out",
    "read_attempts",
    "router_emit",
    "read_skips",
    "to_pandas",
]

Observer = Callable[[object], None]


# Tuples, not `Skip | Attempt | Waited`: the union is built anew at every call.
_STEPS = (Skip, Attempt, Waited)
_KEPT = (Attempt, Skip)  # what a router's history keeps


def _dropped() -> bool:
    """Whether loguru has already decided to drop this module's lines (the package is
    disabled, as on import). Asking loguru itself costs its frame lookup and line-number
    decoding, on every record; the decision is read where loguru 0.7 caches it per module
    (`_core.enabled`, replaced whole by `enable`/`disable`). A loguru that keeps it
    elsewhere reads as not dropped, and loguru decides."""
    enabled = getattr(getattr(logger, "_core", None), "enabled", None)
    return type(enabled) is dict and enabled.get(__name__) is False


class LogObserver:
    """Loguru lines: a route's first rest of an outage at WARNING with the provider's own
    error text, later rests and every skip, attempt or wait for capacity at DEBUG (with the
    request's id), a recovery at INFO; a shared store lost, and back, and a budget's
    threshold crossed (`BudgetThreshold`), at WARNING."""

    def __call__(self, record: object) -> None:
        log = logger
        if isinstance(record, _STEPS):  # the common record first
            if _dropped():
                return
            log.debug("policy_router: [{}] {}", record.journey_id, record)
        elif isinstance(record, RestOpened):
            if record.first and denied_at_preflight(record.error):
                log.warning(
                    "policy_router: {} rests {:.0f} s: {}", record.route, record.rest, record.error
                )
            elif record.first:
                log.warning(
                    "policy_router: {} rests {:.0f} s after {} failures: {}",
                    record.route,
                    record.rest,
                    record.failures,
                    record.error,
                )
            else:
                log.debug("policy_router: {} rests again for {:.0f} s", record.route, record.rest)
        elif isinstance(record, RestClosed):
            log.info("policy_router: {} recovered after {} failures", record.route, record.failures)
        elif isinstance(record, StoreLost):
            log.warning(
                "policy_router: Redis at {} is unreachable ({}): budgets refuse calls and "
                "health uses this process's own view until it answers again",
                record.store,
                record.error,
            )
        elif isinstance(record, StoreBack):
            log.warning(
                "policy_router: Redis at {} answers again after {:.1f} s; shared budgets "
                "and health resumed",
                record.store,
                record.after,
            )
        elif isinstance(record, BudgetThreshold):
            log.warning(
                "policy_router: budget {} passed {:.0%} of its cap: {} spent of {}{}",
                record.scope, record.fraction, record.spent, record.cap,
                f" ({record.period}, resets {record.resets_at:%Y-%m-%d %H:%M} UTC)"
                if record.resets_at is not None else "",
            )


def fan_out(observers: Sequence[Observer]) -> Observer:
    """One observer that calls each of `observers`, isolating their failures."""
    broken: set[int] = set()

    def emit(record: object) -> None:
        for observer in observers:
            try:
                observer(record)
            except Exception as error:  # an observer must never fail a call
                if id(observer) not in broken:
                    broken.add(id(observer))
                    logger.warning(
                        "policy_router: observer {!r} raised {!r}; ignoring it", observer, error
                    )

    return emit


def router_emit(
    keep: Callable[[tuple[float, Attempt | Skip]], None], observers: Sequence[Observer]
) -> Observer:
    """The router's own observers, then `observers` (as `fan_out`): every attempt and skip
    given to `keep` with the time it was told (`History.keeper`), and every record to a
    `LogObserver`, asked only while loguru keeps the package's lines. The two see every
    attempt of every call, so they are told in this one frame; a failure of theirs never
    fails a call either (said once).

    Every record is told right after LiteLLM's call has left the CPU's caches cold, where
    each frame costs microseconds: so the history's keeping and the question `_dropped`
    asks loguru are done here, not in frames of their own (about 6 µs a call, measured)."""
    log, others = LogObserver(), fan_out(observers) if observers else None
    broken: list[Exception] = []

    def emit(record: object) -> None:
        try:
            if isinstance(record, _KEPT):
                # An attempt is kept without its exception, whose traceback holds every frame
                # of its call (the kwargs, a stream opened there and its connection) alive
                # for as long as the history keeps the attempt.
                kept = record
                if type(kept) is Attempt and kept.exception is not None:
                    kept = replace(kept, exception=None)
                keep((time.time(), kept))
            enabled = getattr(getattr(logger, "_core", None), "enabled", None)
            if type(enabled) is not dict or enabled.get(__name__) is not False:
                log(record)
        except Exception as error:  # as in fan_out: said once, the call goes on
            if not broken:
                broken.append(error)
                logger.warning("policy_router: the router's log raised {!r}; ignoring it", error)
        if others is not None:
            others(record)

    return emit


_COLUMNS = (
    "time",
    "group_name",
    "route",
    "outcome",
    "fault",
    "status",
    "latency",
    "first_chunk",
    "tokens_in",
    "tokens_out",
    "cost_micros",
    "currency",
    "journey_id",
    "error",
    "route_id",
)
_SKIP_COLUMNS = ("time", "group_name", "route", "check_name", "reason", "journey_id", "route_id")
_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS attempts ({', '.join(_COLUMNS)})",
    f"CREATE TABLE IF NOT EXISTS skips ({', '.join(_SKIP_COLUMNS)})",
)


class AttemptLog:
    """An observer that appends one row per attempt, and one per skip, to a SQLite file.

    Table `attempts`, columns: time (Unix seconds), group_name, route, outcome ("answered"
    or the fault), fault (None when answered), status, latency (seconds; for a stream, to
    its first chunk), first_chunk (a stream's time to first chunk, else None), tokens_in,
    tokens_out, cost_micros and currency (None when unpriced), journey_id, error (the
    provider's error text, secrets redacted; None when answered), route_id (the route's
    identity; `route` is its display name). Table `skips`: time, group_name, route,
    check_name ("rate_limit", "budget", ...), reason (the sentence), journey_id, route_id.
    A log written by an earlier version gains the new columns and table on first write. Safe from several threads and processes (SQLite's own locking, WAL
    journal). Writes are best-effort: a failing log never fails a call, and says so once
    (a loguru WARNING).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._warned = False
        self._ready = False

    def __call__(self, record: object) -> None:
        columns: tuple[str, ...]
        if isinstance(record, Attempt):
            table, columns, row = "attempts", _COLUMNS, attempt_row(record, time.time())
        elif isinstance(record, Skip):
            table, columns, row = "skips", _SKIP_COLUMNS, skip_row(record, time.time())
        else:
            return
        import sqlite3

        try:
            with self._lock, sqlite3.connect(self.path, timeout=5.0) as db:
                if not self._ready:
                    _prepare(db)
                    self._ready = True
                db.execute(
                    f"INSERT INTO {table} ({', '.join(columns)}) "
                    f"VALUES ({', '.join('?' * len(columns))})",
                    tuple(row[c] for c in columns),
                )
        except (sqlite3.Error, OSError) as error:
            if not self._warned:
                self._warned = True
                logger.warning(
                    "policy_router: the attempt log {} failed ({}); calls go on without it",
                    self.path,
                    error,
                )


def attempt_row(record: Attempt, at: float) -> dict[str, Any]:
    """An attempt as a row of the attempt log's `attempts` table, logged at `at`."""
    usage, cost = record.usage, record.cost
    return {
        "time": at,
        "group_name": record.group,
        "route": record.route,
        "outcome": record.outcome,
        "fault": None if record.ok else record.outcome,
        "status": record.status,
        "latency": record.elapsed,
        "first_chunk": record.elapsed if record.streamed else None,
        "tokens_in": usage.prompt if usage else None,
        "tokens_out": usage.completion if usage else None,
        "cost_micros": cost.micros if cost else None,
        "currency": cost.currency if cost else None,
        "journey_id": record.journey_id,
        "error": record.error or None,
        "route_id": record.route_id or record.route,
    }


def skip_row(record: Skip, at: float) -> dict[str, Any]:
    """A skip as a row of the attempt log's `skips` table, logged at `at`."""
    return {
        "time": at,
        "group_name": record.group,
        "route": record.route,
        "check_name": record.check.value,
        "reason": record.reason,
        "journey_id": record.journey_id,
        "route_id": record.route_id or record.route,
    }


def _prepare(db: Any) -> None:
    """Create the tables, and bring a log from an earlier version up to date."""
    db.execute("PRAGMA journal_mode=WAL")
    for statement in _SCHEMA:
        db.execute(statement)
    for table, columns in (("attempts", _COLUMNS), ("skips", _SKIP_COLUMNS)):
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        for column in columns:
            if column not in have:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {column}")


def _read(path: str | Path, table: str) -> list[dict[str, Any]]:
    import sqlite3

    with sqlite3.connect(Path(path), timeout=5.0) as db:
        db.row_factory = sqlite3.Row
        if not db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone():
            return []
        return [dict(row) for row in db.execute(f"SELECT * FROM {table} ORDER BY rowid")]


def read_attempts(path: str | Path) -> list[dict[str, Any]]:
    """Every attempt row of the attempt log at `path`, oldest first, as dicts keyed by column
    name."""
    return _read(path, "attempts")


def read_skips(path: str | Path) -> list[dict[str, Any]]:
    """Every skip row of the attempt log at `path` (a route passed over, and why), oldest first;
    empty for a log written before skips were logged."""
    return _read(path, "skips")


def to_pandas(path: str | Path) -> Any:
    """The attempt log as a pandas DataFrame (needs pandas installed)."""
    try:
        import pandas as pd  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        raise ImportError(
            "to_pandas needs pandas: pip install 'policy-router[notebooks]'"
        ) from None
    return pd.DataFrame(read_attempts(path), columns=list(_COLUMNS))
