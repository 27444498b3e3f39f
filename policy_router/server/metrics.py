"""`GET /metrics`: the server's counters in Prometheus' exposition format, by
`prometheus-client`.

Each request is counted once it is answered (a stream: once it ends), by the name of its
key, its group, the route that answered and its HTTP status; each attempt by route and
outcome; each refusal (nothing sent) by its reason, the error code the client got; money
charged by route, in the budget's currency; and the seconds to the answer. Labels hold
names the policy file gave (keys, groups, routes) and codes this server defines: never a
key's text, a prompt, or a model string a client made up (a group no route serves is
counted as `unknown`, so a hostile client cannot grow the label set).

With several workers (`--workers`), each process writes its numbers where
`PROMETHEUS_MULTIPROC_DIR` points and a scrape of any of them adds them all up
(prometheus-client's multiprocess mode), so one scrape shows the whole server.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from ..core.journey import Journey

__all__ = ["Meter", "Seen"]

_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, float("inf"))


@dataclass(slots=True, kw_only=True)
class Seen:
    """What a request turned out to be, filled in as the server learns it."""

    key: str = "none"
    group: str = "none"
    journey: Journey | None = None
    stream: Any = field(default=None)


class Meter:
    """The server's Prometheus metrics, in a registry of this app's own (several apps in
    one process count apart), or in the multiprocess files when `PROMETHEUS_MULTIPROC_DIR`
    is set."""

    def __init__(self, groups: Collection[str]) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self._groups = frozenset(groups)
        shared = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        self._registry = CollectorRegistry()
        if shared:
            from prometheus_client import multiprocess

            multiprocess.MultiProcessCollector(self._registry)  # type: ignore[no-untyped-call]
        into = None if shared else self._registry
        self.requests = Counter(
            "policy_router_requests", "Requests answered, by key, group, the route that answered and HTTP status",
            ["key", "group", "route", "status"], registry=into,
        )
        self.attempts = Counter(
            "policy_router_attempts", "Requests sent to a provider, by route and how each ended",
            ["key", "group", "route", "outcome"], registry=into,
        )
        self.refusals = Counter(
            "policy_router_refusals", "Requests refused with nothing sent, by the error code the client got",
            ["key", "group", "reason"], registry=into,
        )
        self.spend = Counter(
            "policy_router_spend", "Money charged to the budgets, by route, in the budget's currency",
            ["key", "group", "route", "currency"], registry=into,
        )
        self.seconds = Histogram(
            "policy_router_request_seconds", "Seconds from a request to its answer (a stream: to its end)",
            ["key", "group", "status"], buckets=_BUCKETS, registry=into,
        )
        # Each labelled child, kept once made: prometheus-client's `labels()` checks and
        # joins the values and takes a lock at every call, four calls a request. The
        # label values come from bounded sets (see the module docstring), so this holds
        # no more than the metrics themselves do.
        self._children: dict[tuple[Any, ...], Any] = {}

    def _child(self, metric: Any, *values: str) -> Any:
        key = (metric, *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def group_of(self, asked: object) -> str:
        return asked if isinstance(asked, str) and asked in self._groups else "unknown"

    def done(self, seen: Seen, status: int, seconds: float, body: bytes | None = None) -> None:
        """Count one request, answered with `status` after `seconds`."""
        journey = seen.journey
        route = (journey.answered_by if journey is not None else None) or "none"
        code = str(status)
        self._child(self.requests, seen.key, seen.group, route, code).inc()
        self._child(self.seconds, seen.key, seen.group, code).observe(seconds)
        attempts = journey.attempts if journey is not None else ()
        for attempt in attempts:
            self._child(self.attempts, seen.key, seen.group, attempt.route, attempt.outcome).inc()
            if attempt.cost is not None:
                self._child(self.spend, seen.key, seen.group, attempt.route, attempt.cost.currency).inc(attempt.cost.micros / 1_000_000)
        if status >= 400 and not attempts:
            self._child(self.refusals, seen.key, seen.group, _reason(body)).inc()

    def exposition(self) -> tuple[bytes, str]:
        """The text a scrape reads, and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self._registry), CONTENT_TYPE_LATEST


def _reason(body: bytes | None) -> str:
    """The code of an error body (OpenAI's `code`, else its or Anthropic's `type`)."""
    try:
        error = json.loads(body or b"{}").get("error") or {}
    except (ValueError, AttributeError):
        return "unknown"
    found = error.get("code") or error.get("type") if isinstance(error, dict) else None
    return found if isinstance(found, str) and found.isidentifier() else "unknown"
