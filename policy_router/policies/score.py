"""An explainable score from a route's history, and `Order.SCORE`, which ranks by it.

Three qualities, each between 0 and 1, blended toward an optimistic start as though the
route had begun with `pretend_attempts` imaginary observations at `optimistic_start`, so a
new route starts at 0.75 and is explored, and enough real evidence outweighs the prior:

- success: successes over attempts (weighted by recency when a half-life is set);
- speed: `ref / (ref + mean)`, the mean over *successful* attempts only (a route failing in
  5 ms never looks fast), `ref` the latency that scores 0.5: 2 s to a whole reply, 0.5 s
  to a stream's first chunk. Regular and streaming history are never blended;
- cost (beyond the design this grew from): the cheapest candidate's estimate of this
  request over this route's, from our own price tables; an unpriced route scores the
  optimistic start.

The total is their weighted mean. The history itself is read by the metrics store
(`observe.metrics`), one aggregate query per ranking, and handed in as `Evidence`.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from loguru import logger

from ..ground.errors import ConfigError
from .order import DEFAULT_REPLY_TOKENS, OrderContext, round_robin

if TYPE_CHECKING:
    from .candidate import Candidate

__all__ = ["Evidence", "HistoryQuery", "RouteScore", "Score", "Scored", "quality"]


@dataclass(frozen=True, slots=True)
class Score:
    """How history becomes a score (see the module docstring). `lookback` seconds of
    history count equally (14 days by default); a `half_life` in seconds replaces it: an
    attempt that old counts half, and history older than six half-lives is not read. Both
    are at least an hour: history is kept summed per hour, and the hour in progress counts
    in full.

    `scopes` says whose history is read: None (the default) the router's own
    (`metrics_scope=`, its name by default); a list of scope names, their history summed
    (a staging and a production router learning together, each naming both; the router's
    own is read only when listed); `"all"` every scope in the store. Writes always go
    under the router's own scope. A store of your own reads `HistoryQuery.scopes`."""

    success_weight: float = 1.0
    """The weight of the success rate in the total (at least 0)."""
    speed_weight: float = 1.0
    """The weight of speed in the total (at least 0)."""
    cost_weight: float = 0.0
    """The weight of cost in the total: 0 by default, so price never outranks an answer."""
    regular_latency_ref: float = 2.0
    """Seconds to a whole reply that score 0.5 for speed."""
    streaming_ttft_ref: float = 0.5
    """Seconds to a stream's first chunk that score 0.5 for speed."""
    optimistic_start: float = 0.75
    """Where a route without history starts, between 0 and 1, so a new route is explored."""
    pretend_attempts: float = 5.0
    """How many imaginary attempts at `optimistic_start` real evidence must outweigh."""
    lookback: float = 14 * 24 * 3600.0
    """Seconds of history that count, equally (at least an hour)."""
    half_life: float | None = None
    """Seconds after which an attempt counts half, in place of `lookback` (at least an hour)."""
    scopes: tuple[str, ...] | str | None = None
    """Whose history is read: None the router's own, a list of scopes, or `"all"`."""

    def __post_init__(self) -> None:
        if self.scopes is not None and self.scopes != "all":
            given = self.scopes
            names = (given,) if isinstance(given, str) else tuple(given) if isinstance(given, list | tuple) else None
            if not names or not all(isinstance(n, str) and n.strip() for n in names):
                raise ConfigError(
                    f'Score.scopes must be None (the router\'s own), "all", or a non-empty list '
                    f"of scope names, got {given!r}"
                )
            object.__setattr__(self, "scopes", tuple(dict.fromkeys(n.strip() for n in names)))
        for name in ("success_weight", "speed_weight", "cost_weight"):
            _number(self, name, low=0.0)
        if self.success_weight + self.speed_weight + self.cost_weight <= 0:
            raise ConfigError("Score: at least one of success_weight, speed_weight, cost_weight must be > 0")
        for name in ("regular_latency_ref", "streaming_ttft_ref", "pretend_attempts"):
            _number(self, name, low=0.0, strict=True)
        _number(self, "optimistic_start", low=0.0, high=1.0)
        # History is summed per hour (observe.metrics): a window or a half-life shorter than
        # one would only pretend to be finer.
        _number(self, "lookback", low=3600.0)
        if self.half_life is not None:
            _number(self, "half_life", low=3600.0)

    @property
    def window(self) -> float:
        """The seconds of history one ranking reads."""
        return self.lookback if self.half_life is None else 6 * self.half_life


def _scopes(scopes: tuple[str, ...] | str | None) -> tuple[str, ...] | None:
    if scopes is None:
        return None
    return () if scopes == "all" else tuple(scopes)


def _number(score: Score, name: str, *, low: float, high: float | None = None, strict: bool = False) -> None:
    value = getattr(score, name)
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok and (value <= low if strict else value < low):
        ok = False
    if ok and high is not None and value > high:
        ok = False
    if not ok:
        bound = f"> {low:g}" if strict else f">= {low:g}"
        raise ConfigError(f"Score.{name} must be a number {bound}{f' and <= {high:g}' if high is not None else ''}, got {value!r}")


@dataclass(kw_only=True, frozen=True, slots=True)
class Evidence:
    """One route's history in one partition (scope, route id, model, endpoint, regular or
    streaming), as the metrics store aggregates it: weighted attempts and successes, the
    weight and total seconds of successful latencies, and exact tallies of errors, rate
    limits and timeouts."""

    attempts: float = 0.0
    successes: float = 0.0
    latency_weight: float = 0.0
    latency_total: float = 0.0
    errors: int = 0
    rate_limited: int = 0
    timeouts: int = 0

    def valid(self) -> bool:
        """Whether the figures are possible (a store returning others is not believed)."""
        values = (self.attempts, self.successes, self.latency_weight, self.latency_total)
        return (
            all(isinstance(v, int | float) and math.isfinite(v) and v >= 0 for v in values)
            and min(self.errors, self.rate_limited, self.timeouts) >= 0
            and self.successes <= self.attempts + 1e-9
            and self.latency_weight <= self.successes + 1e-9
        )


@dataclass(kw_only=True, frozen=True, slots=True)
class RouteScore:
    """A route's score and what it is made of: `total` (0..1, higher first), the success,
    speed and cost qualities, and the `evidence` behind them."""

    route: str
    """The route's name."""
    id: str
    """The route's identity, which its history is kept under."""
    total: float
    """The weighted sum of the qualities, 0..1: routes are tried highest first."""
    success_quality: float
    """The success rate, drawn toward `Score.optimistic_start` while evidence is thin."""
    speed_quality: float
    """0..1, 0.5 at the reference latency (`regular_latency_ref`, `streaming_ttft_ref`),
    drawn toward `optimistic_start` likewise."""
    cost_quality: float
    """The cheapest estimate of the group over this route's: 1 for the cheapest;
    `optimistic_start` when unpriced. Weighed by `cost_weight` (0 by default)."""
    evidence: Evidence = field(default_factory=Evidence)
    """The weighted attempts and latencies the qualities were read from."""
    streaming: bool = False
    """True when scored for a stream (speed is then its time to first chunk)."""

    def __str__(self) -> str:
        e = self.evidence
        mean = f", mean {e.latency_total / e.latency_weight:.2f} s" if e.latency_weight else ""
        return (
            f"score {self.total:.2f} (success {self.success_quality:.2f}, speed "
            f"{self.speed_quality:.2f}, cost {self.cost_quality:.2f}; {e.attempts:g} attempts"
            f"{mean})"
        )


def quality(score: Score, evidence: Evidence, streaming: bool, cost: float | None) -> tuple[float, float, float, float]:
    """(total, success, speed, cost) for one route's evidence; `cost` its cost quality
    (None: unpriced)."""
    start, pretend = score.optimistic_start, score.pretend_attempts
    success = (evidence.successes + start * pretend) / (evidence.attempts + pretend)
    speed = start
    if evidence.latency_weight > 0:
        ref = score.streaming_ttft_ref if streaming else score.regular_latency_ref
        mean = evidence.latency_total / evidence.latency_weight
        raw = ref / (ref + mean)
        speed = (raw * evidence.latency_weight + start * pretend) / (evidence.latency_weight + pretend)
    priced = start if cost is None else cost
    weights = score.success_weight + score.speed_weight + score.cost_weight
    total = (
        score.success_weight * success + score.speed_weight * speed + score.cost_weight * priced
    ) / weights
    return total, success, speed, priced


def _costs(candidates: Sequence[Candidate], context: OrderContext) -> dict[str, float | None]:
    facts = context.facts
    prompt = facts.prompt_tokens if facts is not None and facts.prompt_tokens else 1000
    reply = facts.reply_tokens if facts is not None and facts.reply_tokens else DEFAULT_REPLY_TOKENS
    estimates = {c.id: c.price.estimate(prompt, reply) if c.price is not None else None for c in candidates}
    known = [e for e in estimates.values() if e is not None]
    cheapest = min(known, default=None)
    return {
        i: (None if e is None else 1.0 if e <= 0 or not cheapest else cheapest / e)
        for i, e in estimates.items()
    }


@dataclass(kw_only=True, frozen=True, slots=True)
class HistoryQuery:
    """What `Scored` asks the metrics store: these (route id, model) partitions of one
    endpoint, regular or streaming, over `window` seconds (weighted by `half_life`)."""

    routes: tuple[tuple[str, str], ...]
    endpoint: str
    streaming: bool
    window: float
    half_life: float | None
    scopes: tuple[str, ...] | None = None
    """The scopes whose history is summed, or None for the one `aggregate` is given; an
    empty tuple means every scope."""


Reader = Callable[[HistoryQuery], Mapping[str, Evidence]]


class Scored:
    """`Order.SCORE` bound to a router's history: best score first; equal scores rotate
    (round robin) instead of one route always winning; when history cannot be read (the
    store is down, or returned what cannot be true) the group's listed order, with one
    warning (later ones at DEBUG). It never blocks a request on the store for longer than
    the store's own timeout."""

    reads_health = False

    retry_every = 1.0
    """Seconds a ranking does not ask a store that just failed (the listed order meanwhile)."""

    def __init__(self, score: Score | None = None, read: Reader | None = None) -> None:
        self.score = score or Score()
        self._read = read
        self._warned = False
        self._down_until = 0.0

    @property
    def reads_prices(self) -> bool:
        """Whether the ranking weighs each route's estimated cost for the request (a
        `cost_weight` above 0): the request's tokens are then counted for it."""
        return self.score.cost_weight > 0

    def bound(self, read: Reader, score: Score | None) -> Scored:
        """This ordering reading history through `read`, with `score` when one is given."""
        return Scored(score or self.score, read)

    def scores(self, candidates: Sequence[Candidate], context: OrderContext) -> list[RouteScore]:
        """Every candidate's `RouteScore`, as listed; raises what the store raised."""
        if self._read is None:
            raise ConfigError("Order.SCORE needs a router built with metrics=... to read history")
        query = HistoryQuery(
            routes=tuple(dict.fromkeys((c.id, c.route.model) for c in candidates)),
            endpoint=context.endpoint,
            streaming=context.streaming,
            window=self.score.window,
            half_life=self.score.half_life,
            scopes=_scopes(self.score.scopes),
        )
        found = self._read(query)
        missing = [c.id for c in candidates if c.id not in found]
        bad = [i for i, e in found.items() if not isinstance(e, Evidence) or not e.valid()]
        if missing or bad:
            raise ValueError(f"the metrics store answered for {sorted(found)}: missing {missing}, impossible {bad}")
        costs = _costs(candidates, context)
        out = []
        for c in candidates:
            total, success, speed, cost = quality(self.score, found[c.id], context.streaming, costs[c.id])
            out.append(RouteScore(route=c.name, id=c.id, total=total, success_quality=success, speed_quality=speed, cost_quality=cost, evidence=found[c.id], streaming=context.streaming))
        return out

    def order(self, candidates: Sequence[Candidate], context: OrderContext) -> list[Candidate]:
        if len(candidates) < 2 or time.monotonic() < self._down_until:
            return list(candidates)
        try:
            scored = self.scores(candidates, context)
        except Exception as error:
            self._down_until = time.monotonic() + self.retry_every
            (logger.debug if self._warned else logger.warning)(
                "policy_router: Order.SCORE cannot read history ({}); routes are tried as listed",
                error,
            )
            self._warned = True
            return list(candidates)
        totals = {s.id: round(s.total, 9) for s in scored}
        ranked = sorted(candidates, key=lambda c: -totals[c.id])
        out: list[Candidate] = []
        for _, tied in itertools.groupby(ranked, key=lambda c: totals[c.id]):
            out += round_robin(list(tied), context)  # equal scores take turns, among themselves
        return out

    def on_result(self, route: str, outcome: str, elapsed: float) -> None:
        """History is read from the metrics store, which the router writes: nothing here."""

    def __repr__(self) -> str:
        return f"Order.SCORE({self.score!r})"
