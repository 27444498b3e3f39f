"""`MetricsStore`, the protocol, and what the three SQL backends share: the schema check,
create / inspect / migrate, the batched insert, the one aggregate query, the read-back.

A store never alters a schema on its own. The embedded ones (SQLite, DuckDB) create the
current schema in a target that holds no table yet (an absent file, an empty database);
PostgreSQL, shared by many machines, is created only by `policy-router metrics create`.
A target at another version is refused with the command that fixes it (`migrate` for an
older one) and left exactly as it was.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from ...policies.score import Evidence, HistoryQuery
from . import schema
from .schema import HOURLY, META, TABLE, VERSION, MetricRow, MetricsSchemaError

__all__ = ["MIGRATIONS", "MetricsStore", "SQLMetrics", "SchemaState"]

# version -> the statements that bring a schema from it to version + 1. Version 1 is the
# first: nothing older exists to migrate from yet.
MIGRATIONS: dict[int, list[str]] = {}


@runtime_checkable
class MetricsStore(Protocol):
    """Where a router records its attempts and reads its routes' history back.

    `aggregate` answers one ranking with one statement and one `Evidence` per requested
    route (zeros for a route without history); `read` returns rows for a report. Both
    raise the backend's errors: the router's recorder and `Order.SCORE` decide what a
    failure means (a warning; the listed order), never the store."""

    target: str

    def write(self, rows: Sequence[MetricRow]) -> None: ...

    def aggregate(self, query: HistoryQuery, scope: str, now: float) -> dict[str, Evidence]: ...

    def read(self, scope: str | None = None, since: float | None = None) -> list[MetricRow]: ...

    def close(self) -> None: ...


@dataclass(kw_only=True, frozen=True, slots=True)
class SchemaState:
    """What a metrics target holds: `state` is "absent" (no table of ours, or no
    database), "current", "older", "newer" or "foreign" (tables of ours, not in a shape we
    know); `version` the one it says; `rows` how many attempts it holds; `action` what to
    do next."""

    target: str
    state: str
    version: int | None
    rows: int
    action: str

    def __str__(self) -> str:
        version = "-" if self.version is None else str(self.version)
        return (
            f"{self.target}: {self.state} (schema {version}; this policy_router needs "
            f"{VERSION}), {self.rows} rows. {self.action}"
        )


class SQLMetrics:
    """The shared part of the SQL backends (see the module docstring). A subclass says its
    dialect and how to get a connection; everything else is here."""

    dialect: ClassVar[str]
    """The SQL it speaks: each backend's class says."""
    creates_when_empty: ClassVar[bool] = True

    def __init__(self, *, target: str) -> None:
        self.target = target  # where the rows are, no password: what messages name
        self._checked = False
        self._check_lock = threading.Lock()

    # -- what a subclass provides ------------------------------------------------------
    def _run(self, work: Callable[[Any], Any], write: bool = False) -> Any:
        """Run `work(cursor)` in one transaction on a connection, and return its result;
        `write` when it writes (SQLite then takes the write lock first, waiting for it,
        rather than fail a read-then-write against another process's)."""
        raise NotImplementedError

    def _tables(self, cur: Any) -> set[str]:
        raise NotImplementedError

    def close(self) -> None:
        """Close what the store opened."""

    # -- the schema --------------------------------------------------------------------
    def _state(self, cur: Any) -> SchemaState:
        tables = self._tables(cur)
        ours = {TABLE, HOURLY, META}
        if not tables & ours:
            fix = (
                "Nothing to do: the first write creates it."
                if self.creates_when_empty
                else f"Run `policy-router metrics create {self.target}`."
            )
            return SchemaState(target=self.target, state="absent", version=None, rows=0, action=fix)
        if ours - tables:
            return SchemaState(
                target=self.target, state="foreign", version=None, rows=0,
                action="It holds some of our tables but not all: move it aside and create a new one.",
            )
        found = cur.execute(f"SELECT version FROM {META} WHERE component = 'metrics'").fetchall()
        version = int(found[0][0]) if found else None
        rows = int(cur.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchall()[0][0])
        if version == VERSION:
            return SchemaState(target=self.target, state="current", version=version, rows=rows, action="Ready.")
        if version is not None and version < VERSION:
            return SchemaState(
                target=self.target, state="older", version=version, rows=rows,
                action=f"Stop its writers and run `policy-router metrics migrate {self.target}`.",
            )
        if version is not None:
            return SchemaState(
                target=self.target, state="newer", version=version, rows=rows,
                action="A newer policy_router wrote it: upgrade this one, or use another target.",
            )
        return SchemaState(target=self.target, state="foreign", version=None, rows=rows, action="Its schema table names no metrics version.")

    def inspect(self) -> SchemaState:
        """The target's schema state, read only."""
        return self._run(self._state)  # type: ignore[no-any-return]

    def create(self) -> SchemaState:
        """Create the current schema in a target that holds none; refuse any other."""

        def work(cur: Any) -> SchemaState:
            state = self._state(cur)
            if state.state != "absent":
                raise MetricsSchemaError(f"{self.target} already holds a metrics schema ({state.state}): {state.action}")
            for statement in schema.create_sql(self.dialect):
                cur.execute(statement)
            return SchemaState(target=self.target, state="current", version=VERSION, rows=0, action="Ready.")

        return self._run(work, write=True)  # type: ignore[no-any-return]

    def migrate(self) -> SchemaState:
        """Bring an older schema to the current one, one version at a time in one
        transaction; a current one is left as it is. Stop every writer first."""

        def work(cur: Any) -> SchemaState:
            state = self._state(cur)
            if state.state == "current":
                return state
            if state.state != "older" or state.version is None:
                raise MetricsSchemaError(f"{self.target} cannot be migrated ({state.state}): {state.action}")
            for version in range(state.version, VERSION):
                if version not in MIGRATIONS:
                    raise MetricsSchemaError(f"no migration from metrics schema {version}; nothing was changed")
                for statement in MIGRATIONS[version]:
                    cur.execute(statement)
                cur.execute(f"UPDATE {META} SET version = {version + 1} WHERE component = 'metrics'")
            return self._state(cur)

        return self._run(work, write=True)  # type: ignore[no-any-return]

    def _ready(self) -> None:
        """Checked once per store: the current schema, or created where that is allowed."""
        if self._checked:
            return
        with self._check_lock:
            if self._checked:
                return
            state = self.inspect()
            if state.state == "absent" and self.creates_when_empty:
                try:
                    self.create()
                except Exception:  # another process created it first: read what it made
                    state = self.inspect()
                    if state.state == "absent":
                        raise
                state = self.inspect()
            if state.state != "current":
                raise MetricsSchemaError(f"metrics target {state}")
            self._checked = True

    # -- rows --------------------------------------------------------------------------
    def write(self, rows: Sequence[MetricRow]) -> None:
        """Append `rows`, and add them to their hours' sums, in one transaction."""
        if not rows:
            return
        self._ready()
        mark = "%s" if self.dialect == "postgres" else "?"
        raw, summed = schema.insert_sql(mark), schema.hourly_sql(mark)
        values, hours = [r.values() for r in rows], schema.hourly(rows)

        def work(cur: Any) -> None:
            cur.executemany(raw, values)
            if hours:
                cur.executemany(summed, hours)

        self._run(work, write=True)

    def aggregate(self, query: HistoryQuery, scope: str, now: float) -> dict[str, Evidence]:
        """One `Evidence` per requested route id, from one statement."""
        if not query.routes:
            return {}
        self._ready()
        sql, args = schema.aggregate_sql(self.dialect, query, scope, now)
        found = schema.evidence(self._run(lambda cur: cur.execute(sql, args).fetchall()))
        expected = {r for r, _ in query.routes}
        if set(found) != expected:
            raise ValueError(f"the metrics store answered for {sorted(found)}, not {sorted(expected)}")
        return found

    def read(self, scope: str | None = None, since: float | None = None) -> list[MetricRow]:
        """The rows of `scope` (every scope: None) newer than `since` (Unix seconds), oldest
        first, for a report."""
        self._ready()
        mark = "%s" if self.dialect == "postgres" else "?"
        where: list[str] = ["1 = 1"]
        args: list[object] = []
        if scope is not None:
            where.append(f"scope = {mark}")
            args.append(scope)
        if since is not None:
            where.append(f"recorded_at >= {mark}")
            args.append(since)
        sql = f"SELECT {', '.join(schema.COLUMNS)} FROM {TABLE} WHERE {' AND '.join(where)} ORDER BY recorded_at"
        rows = self._run(lambda cur: cur.execute(sql, args).fetchall())
        return [
            MetricRow(**{c: bool(v) if c == "streaming" else v for c, v in zip(schema.COLUMNS, r, strict=True)})  # type: ignore[arg-type]
            for r in rows
        ]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.target!r})"
