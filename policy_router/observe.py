"""Observation: every decision goes to observers as a frozen record.

The records are the journey's own `Skip` and `Attempt`, the breaker's `RestOpened` and
`RestClosed`, and a shared store's `StoreLost` and `StoreBack`. An observer is any callable taking one record; it must not raise (an
observer that does is reported once and otherwise ignored: observing never fails a call).
The default, `LogObserver`, writes loguru lines under the `policy_router` name, which the
package disables on import: `logger.enable("policy_router")` turns them on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from loguru import logger

from .breaker import RestClosed, RestOpened
from .journey import Attempt, Skip
from .store import StoreBack, StoreLost

__all__ = ["AttemptLog", "LogObserver", "Observer", "fan_out", "read_attempts", "to_pandas"]

Observer = Callable[[object], None]


class LogObserver:
    """Loguru lines: a route's first rest of an outage at WARNING with the provider's own
    error text, later rests and every skip or attempt at DEBUG, a recovery at INFO; a
    shared store lost, and back, at WARNING."""

    def __call__(self, record: object) -> None:
        log = logger
        if isinstance(record, Skip | Attempt):  # the common record first
            log.debug("policy_router: {}", record)
        elif isinstance(record, RestOpened):
            if record.first:
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
)
_SCHEMA = f"CREATE TABLE IF NOT EXISTS attempts ({', '.join(_COLUMNS)})"


class AttemptLog:
    """An observer that appends one row per attempt to a SQLite file.

    Columns: time (Unix seconds), group_name, route, outcome ("answered" or the fault),
    fault (None when answered), status, latency (seconds; for a stream, to its first
    chunk), first_chunk (a stream's time to first chunk, else None), tokens_in, tokens_out,
    cost_micros and currency (None when unpriced), journey_id. Safe from several threads
    and processes (SQLite's own locking, WAL journal). Writes are best-effort: a failing
    log never fails a call, and says so once (a loguru WARNING).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._warned = False
        self._ready = False

    def __call__(self, record: object) -> None:
        if not isinstance(record, Attempt):
            return
        usage = record.usage
        row = (
            time.time(),
            record.group,
            record.route,
            record.outcome,
            None if record.ok else record.outcome,
            record.status,
            record.elapsed,
            record.elapsed if record.streamed else None,
            usage.prompt if usage else None,
            usage.completion if usage else None,
            record.cost.micros if record.cost else None,
            record.cost.currency if record.cost else None,
            record.journey_id,
        )
        import sqlite3

        try:
            with self._lock, sqlite3.connect(self.path, timeout=5.0) as db:
                if not self._ready:
                    db.execute("PRAGMA journal_mode=WAL")
                    db.execute(_SCHEMA)
                    self._ready = True
                db.execute(f"INSERT INTO attempts VALUES ({', '.join('?' * len(_COLUMNS))})", row)
        except (sqlite3.Error, OSError) as error:
            if not self._warned:
                self._warned = True
                logger.warning(
                    "policy_router: the attempt log {} failed ({}); calls go on without it",
                    self.path,
                    error,
                )


def read_attempts(path: str | Path) -> list[dict[str, Any]]:
    """Every row of an attempt log, oldest first, as dicts keyed by column name."""
    import sqlite3

    with sqlite3.connect(Path(path), timeout=5.0) as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute("SELECT * FROM attempts ORDER BY rowid")]


def to_pandas(path: str | Path) -> Any:
    """The attempt log as a pandas DataFrame (needs pandas installed)."""
    try:
        import pandas as pd  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        raise ImportError(
            "to_pandas needs pandas: pip install 'policy-router[notebooks]'"
        ) from None
    return pd.DataFrame(read_attempts(path), columns=list(_COLUMNS))
