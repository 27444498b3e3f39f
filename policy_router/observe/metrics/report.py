"""`router.report()` and `policy-router report` read from a metrics store: per route id,
regular and streaming apart, every configured route listed even without rows, with
tallies of errors, rate limits and timeouts."""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from ...ground.money import Money
from ..report import Report, RouteReport
from .schema import MetricRow

__all__ = ["report_of"]


def _percentile(values: Sequence[float], share: float) -> float | None:
    if not values:
        return None
    return values[max(math.ceil(share * len(values)) - 1, 0)]


def report_of(
    rows: Iterable[MetricRow],
    routes: Sequence[tuple[str, str, str]],
    *,
    source: str,
    since: float | None,
) -> Report:
    """The report of `rows` for `routes` ((group, route id, name) each, as configured; a
    route id in the rows that is not configured is listed too, under its id)."""
    kept: dict[tuple[str, str], list[MetricRow]] = defaultdict(list)
    for row in rows:
        if row.outcome != "not_sent":
            kept[(row.route_id, "streaming" if row.streaming else "regular")].append(row)
    named = {rid: (group, name) for group, rid, name in reversed(routes)}
    out, journeys, answered = [], set(), set()
    ids = list(dict.fromkeys([rid for _, rid, _ in routes] + sorted({k[0] for k in kept})))
    for rid in ids:
        group, name = named.get(rid, ("", rid))
        modes = [m for m in ("regular", "streaming") if (rid, m) in kept] or ["regular"]
        for mode in modes:
            these = kept.get((rid, mode), [])
            ok = sorted(r.latency for r in these if r.outcome == "success" and r.latency is not None)
            costs: dict[str, int] = defaultdict(int)
            for r in these:
                if r.cost_micros is not None and r.currency:
                    costs[r.currency] += int(r.cost_micros)
            tally = Counter(r.outcome for r in these)
            journeys |= {r.journey_id for r in these if r.journey_id}
            answered |= {
                r.journey_id for r in these if r.journey_id and r.outcome in ("success", "closed")
            }
            failures = tuple(
                (o, n) for o, n in tally.most_common() if o not in ("success", "closed")
            )
            out.append(
                RouteReport(
                    route=name, group=group, requests=len(these), answered=tally["success"], p50=_percentile(ok, 0.5),
                    p95=_percentile(ok, 0.95), cost=tuple(Money(m, c) for c, m in sorted(costs.items())),
                    skipped=0, top_skips=(), top_failures=failures[:3], id=rid, mode=mode, errors=tally["error"], rate_limited=tally["rate_limited"],
                    timeouts=tally["timeout"],
                )
            )
    return Report(source=source, since=since, requests=len(journeys), answered=len(answered), routes=tuple(out))


def since_cutoff(since: float | None) -> float | None:
    """Unix seconds `since` seconds ago (None: all rows)."""
    return None if since is None else time.time() - since
