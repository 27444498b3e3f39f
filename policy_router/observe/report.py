"""Health and spend per route over a window: `router.report()`, `policy-router report`.

A `Report` is read from attempt-log rows (`observe.attempt_row`, `observe.skip_row`): the
attempt log's SQLite file (`read`, shared by every process writing it), or a router's own
recent history (`History`, the last `HISTORY` attempts and skips of this process). Per
route: requests sent, success rate, p50/p95 latency of its answers, cost, skips, and the
most frequent skip and failure reasons, with the numbers in them folded ("resting # s more
after # failures") so that one cause counts once. It prints as a table in a terminal and
renders as an HTML table in Jupyter.
"""

from __future__ import annotations

import html
import math
import re
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.journey import Attempt
from ..ground.money import Money
from ..ground.records import Skip
from .observers import attempt_row, read_attempts, read_skips, skip_row

__all__ = ["HISTORY", "History", "Report", "RouteReport", "build", "read"]

HISTORY = 2000
"""How many recent attempts and skips a router keeps for `router.report()`."""

Row = Mapping[str, Any]


@dataclass(kw_only=True, frozen=True, slots=True)
class RouteReport:
    """One route over the window. `requests` counts requests sent to it (attempts);
    `p50`/`p95` are seconds to its answers (to the first chunk for a stream), None without
    answers; `cost` one amount per currency; `top_skips`/`top_failures` the most frequent
    reasons, with counts. Rows are kept by the route's `id`: `route` is the latest name
    the route was logged under, so a renamed route stays one row."""

    route: str
    group: str
    requests: int
    answered: int
    p50: float | None
    p95: float | None
    cost: tuple[Money, ...]
    skipped: int
    top_skips: tuple[tuple[str, int], ...]
    top_failures: tuple[tuple[str, int], ...]
    id: str = ""
    mode: str = ""
    """ "regular" or "streaming" in a report from a metrics store (kept apart), else ""."""
    errors: int = 0
    rate_limited: int = 0
    timeouts: int = 0

    @property
    def success_rate(self) -> float | None:
        """Answers over requests sent, or None when none was sent."""
        return self.answered / self.requests if self.requests else None


_HEAD = ("route", "requests", "ok", "p50", "p95", "cost", "skipped")


@dataclass(kw_only=True, frozen=True, slots=True)
class Report:
    """Every route's `RouteReport` over a window, with the requests it covers.

    `requests` counts distinct requests (journeys) seen, `answered` those with an answer;
    `since` is the window in seconds (None: everything), `source` where the rows came from.
    """

    source: str
    since: float | None
    requests: int
    answered: int
    routes: tuple[RouteReport, ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON: money as decimal strings with the currency."""
        return {
            "source": self.source,
            "since_seconds": self.since,
            "requests": self.requests,
            "answered": self.answered,
            "routes": [
                {
                    "route": r.route,
                    "id": r.id or r.route,
                    "group": r.group,
                    "requests": r.requests,
                    "answered": r.answered,
                    "success_rate": r.success_rate,
                    "p50_seconds": r.p50,
                    "p95_seconds": r.p95,
                    "cost": [{"amount": _amount(m), "currency": m.currency} for m in r.cost],
                    "skipped": r.skipped,
                    "top_skips": [{"reason": t, "count": n} for t, n in r.top_skips],
                    "top_failures": [{"reason": t, "count": n} for t, n in r.top_failures],
                    **({"mode": r.mode, "errors": r.errors, "rate_limited": r.rate_limited,
                        "timeouts": r.timeouts} if r.mode else {}),
                }
                for r in self.routes
            ],
        }

    def _head(self) -> str:
        window = "all rows" if self.since is None else f"the last {_duration(self.since)}"
        share = f", {self.answered / self.requests:.1%}" if self.requests else ""
        return (
            f"{self.requests} request{'s' * (self.requests != 1)} ({self.answered} answered"
            f"{share}) over {window}, from {self.source}"
        )

    @staticmethod
    def _cells(r: RouteReport) -> tuple[str, ...]:
        """A route's cells under `_HEAD`."""
        cost = ", ".join(map(str, r.cost)) or "-"
        rate, p50, p95 = _rate(r.success_rate), _seconds(r.p50), _seconds(r.p95)
        route = f"{r.route} ({r.mode})" if r.mode else r.route
        return (route, str(r.requests), rate, p50, p95, cost, str(r.skipped))

    def __repr__(self) -> str:
        # At the REPL a report reads as its table, not as a dump of RouteReport tuples.
        return str(self)

    def __str__(self) -> str:
        lines = [self._head()]
        if not self.routes:
            return lines[0] + "\n(no attempts or skips in the window)"
        cells = [self._cells(r) for r in self.routes]
        widths = [max(len(row[i]) for row in [_HEAD, *cells]) for i in range(len(_HEAD))]
        for row in [_HEAD, *cells]:
            lines.append(
                "  ".join(
                    cell.ljust(w) if i in (0, 5) else cell.rjust(w)
                    for i, (cell, w) in enumerate(zip(row, widths, strict=True))
                ).rstrip()
            )
        for title, pick in (("top skip reasons", "top_skips"), ("top failures", "top_failures")):
            found = [(r.route, t, n) for r in self.routes for t, n in getattr(r, pick)]
            if found:
                lines.append(f"{title}:")
                lines += [f"  {route}: {text} (x{n})" for route, text, n in found]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        esc = html.escape
        rows = "".join(
            "<tr>"
            + "".join(
                f"<td>{esc(c)}</td>"
                for c in (
                    *self._cells(r),
                    "; ".join(f"{t} (x{n})" for t, n in r.top_skips),
                    "; ".join(f"{t} (x{n})" for t, n in r.top_failures),
                )
            )
            + "</tr>"
            for r in self.routes
        )
        head = "".join(f"<th>{h}</th>" for h in (*_HEAD, "top skip reasons", "top failures"))
        return (
            f"<p>{esc(self._head())}</p><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )


def build(
    attempts: Iterable[Row],
    skips: Iterable[Row],
    *,
    source: str,
    since: float | None = None,
    now: float | None = None,
    top: int = 3,
) -> Report:
    """The report of attempt-log rows newer than `since` seconds before `now`."""
    cutoff = None if since is None else (time.time() if now is None else now) - since
    fresh_attempts = [r for r in attempts if cutoff is None or r["time"] >= cutoff]
    fresh_skips = [r for r in skips if cutoff is None or r["time"] >= cutoff]
    # Kept by (group, route id); a log from before ids has none: its name is its id.
    Key = tuple[str, str]
    by_route: dict[Key, list[Row]] = defaultdict(list)
    skipped: dict[Key, list[Row]] = defaultdict(list)
    names: dict[Key, str] = {}
    names_at: dict[Key, float] = {}
    for rows_of, fresh in ((by_route, fresh_attempts), (skipped, fresh_skips)):
        for row in fresh:
            key = (row["group_name"] or "", row.get("route_id") or row["route"])
            rows_of[key].append(row)
            if key not in names or row["time"] >= names_at.get(key, 0.0):
                names[key], names_at[key] = row["route"], row["time"]
    routes = []
    for route in sorted(names, key=lambda k: (k[0], names[k], k[1])):
        rows = by_route.get(route, [])
        answers = sorted(r["latency"] for r in rows if r["outcome"] == "answered")
        costs: dict[str, int] = defaultdict(int)
        for r in rows:
            if r["cost_micros"] is not None:
                costs[r["currency"]] += int(r["cost_micros"])
        skips_here = Counter(
            f"{r['check_name']}: {_fold(r['reason'])}" for r in skipped.get(route, [])
        )
        # A stream its caller closed early is neither an answer read whole nor a failure.
        failures = Counter(
            _failure(r) for r in rows if r["outcome"] not in ("answered", "closed")
        )
        routes.append(
            RouteReport(
                route=names[route],
                group=route[0],
                requests=len(rows),
                answered=len(answers),
                p50=_percentile(answers, 0.50),
                p95=_percentile(answers, 0.95),
                cost=tuple(Money(m, c) for c, m in sorted(costs.items())),
                skipped=len(skipped.get(route, [])),
                top_skips=tuple(skips_here.most_common(top)),
                top_failures=tuple(failures.most_common(top)),
                id=route[1],
            )
        )
    journeys = {r["journey_id"] for r in (*fresh_attempts, *fresh_skips) if r["journey_id"]}
    answered = {
        r["journey_id"] for r in fresh_attempts if r["outcome"] in ("answered", "closed")
    }
    return Report(source=source, since=since, requests=len(journeys), answered=len(answered & journeys), routes=tuple(routes))


def read(path: str | Path, since: float | None = None, *, now: float | None = None) -> Report:
    """The report of an attempt log file (every process that wrote to it); a `ConfigError`
    naming the file when there is none, or what is there is not an attempt log."""
    import sqlite3

    from ..ground.errors import ConfigError

    path = Path(path)
    if not path.exists():
        raise ConfigError(f"no attempt log at {path}: write one with observers=[AttemptLog(path)]")
    try:
        return build(read_attempts(path), read_skips(path), source=str(path), since=since, now=now)
    except sqlite3.DatabaseError as error:
        raise ConfigError(
            f"{path} is not an attempt log ({error}): give the SQLite file an AttemptLog wrote"
        ) from None


class History:
    """A router's recent attempts and skips, kept in memory for `router.report()`: the last
    `size` of them, each with the time it was told (the router's own `emit` keeps them
    through `keeper`; thread-safe)."""

    def __init__(self, size: int = HISTORY) -> None:
        self._records: deque[tuple[float, Attempt | Skip]] = deque(maxlen=size)

    def keeper(self) -> Callable[[tuple[float, Attempt | Skip]], None]:
        """What keeps one `(time.time(), record)` here: the deque's own append, for the
        router's `emit` (`observers.router_emit`) to call with no Python frame between."""
        return self._records.append

    def report(self, since: float | None = None) -> Report:
        # One C call under the GIL: a consistent snapshot while other threads append, with
        # no lock on the hot path.
        records = self._records.copy()
        attempts = [attempt_row(r, at) for at, r in records if isinstance(r, Attempt)]
        skips = [skip_row(r, at) for at, r in records if isinstance(r, Skip)]
        return build(attempts, skips, source="this process's recent history", since=since)


def _percentile(values: Sequence[float], share: float) -> float | None:
    """The nearest-rank percentile of sorted `values`."""
    if not values:
        return None
    return values[max(math.ceil(share * len(values)) - 1, 0)]


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _fold(text: str | None, limit: int = 90) -> str:
    """A reason with its numbers folded to `#`, so one cause counts once."""
    folded = " ".join(_NUMBER.sub("#", text or "").split())
    return folded if len(folded) <= limit else folded[: limit - 1] + "…"


def _failure(row: Row) -> str:
    status = f" {row['status']}" if row["status"] else ""
    error = f": {_fold(row['error'])}" if row.get("error") else ""
    return f"{row['outcome']}{status}{error}"


def _amount(money: Money) -> str:
    units, micros = divmod(money.micros, 1_000_000)
    return f"{units}.{micros:06d}"


def _rate(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.1%}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


def _duration(seconds: float) -> str:
    if seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"
