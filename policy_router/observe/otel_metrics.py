"""The observer's metrics: counters and histograms of requests and attempts, and gauges
that read each attached router's budget and resting routes when they are collected.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from opentelemetry.metrics import CallbackOptions, Observation

from ..ground.errors import ConfigError, StoreUnavailableError

if TYPE_CHECKING:
    from ..policies.budget import Spending

__all__ = ["DURATION_BUCKETS", "TOKEN_BUCKETS", "Instruments", "Watched"]

# The bucket boundaries the GenAI semantic conventions advise for their two histograms.
DURATION_BUCKETS = [0.01 * 2**i for i in range(14)]
"""Seconds: 0.01, 0.02, 0.04, ... 81.92."""
TOKEN_BUCKETS = [4**i for i in range(14)]
"""Tokens: 1, 4, 16, ... 67,108,864."""


class Watched(Protocol):
    """What the gauges read of a router: its name, its spending and its resting routes.

    A protocol rather than the `Router` class, so that observing knows nothing above it."""

    @property
    def name(self) -> str: ...

    def spending(self) -> Spending | None: ...

    def resting(self) -> Mapping[str, Any]: ...


class Instruments:
    """The instruments of one meter (see `OTelObserver` for what each measures)."""

    def __init__(self, meter: Any) -> None:
        self._routers: list[weakref.ReferenceType[Watched]] = []
        self.requests = meter.create_counter(
            "policy_router.requests", unit="{request}", description="Requests by outcome"
        )
        self.attempts = meter.create_counter(
            "policy_router.attempts",
            unit="{attempt}",
            description="Attempts by route and outcome (answered, a fault kind, or skipped)",
        )
        self.cost = meter.create_counter(
            "policy_router.cost",
            unit="{micro}",
            description="Cost charged, in millionths of policy_router.currency",
        )
        self.request_duration = meter.create_histogram(
            "policy_router.request.duration", unit="s", description="Request duration"
        )
        self.attempt_duration = meter.create_histogram(
            "policy_router.attempt.duration", unit="s", description="Attempt duration"
        )
        self.in_flight = meter.create_up_down_counter(
            "policy_router.in_flight", unit="{attempt}", description="Attempts in flight"
        )
        self.operation_duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens used",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        meter.create_observable_gauge(
            "policy_router.budget.spent",
            callbacks=[self._spent],
            unit="{micro}",
            description="Budget spent, in millionths of policy_router.currency",
        )
        meter.create_observable_gauge(
            "policy_router.budget.reserved",
            callbacks=[self._reserved],
            unit="{micro}",
            description="Budget held by calls in flight, in millionths of the currency",
        )
        meter.create_observable_gauge(
            "policy_router.routes.resting",
            callbacks=[self._resting],
            unit="{route}",
            description="Routes resting after failures",
        )

    def attach(self, router: Watched) -> None:
        """Read `router`'s budget and resting routes into the gauges, while it lives."""
        self._routers.append(weakref.ref(router))

    def _live(self) -> list[Watched]:
        return [r for ref in self._routers if (r := ref()) is not None]

    def _spent(self, _options: CallbackOptions) -> Iterable[Observation]:
        return self._budget("spent")

    def _reserved(self, _options: CallbackOptions) -> Iterable[Observation]:
        return self._budget("reserved")

    def _budget(self, field: str) -> Iterable[Observation]:
        out = []
        for router in self._live():
            try:
                spending = router.spending()
            except (ConfigError, StoreUnavailableError):
                continue  # no budget, or nothing true to report until the store answers
            money = getattr(spending, field)
            out.append(
                Observation(
                    money.micros,
                    {"policy_router.router": router.name, "policy_router.currency": money.currency},
                )
            )
        return out

    def _resting(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(len(router.resting()), {"policy_router.router": router.name})
            for router in self._live()
        ]
