"""policy_router: decide which provider answers an LLM request, over LiteLLM, and say why.

The public names are re-exported here; everything else is private to the package.
"""

import sys as _sys
from contextlib import suppress as _suppress

from loguru import logger as _logger

from .config.changes import Changes, Reconfigured
from .core.journey import Attempt, Explanation, Journey, Routed, Verdict, Waited
from .drive.preflight import PreflightVerdict
from .drive.stream import AsyncRoutedStream, RoutedStream, StreamRestart
from .drive.stream_watch import IncompleteResponseWarning, UncheckedStreamWarning
from .ground.capability import Capability
from .ground.clock import Clock, ManualClock, MonotonicClock
from .ground.errors import (
    AllRestingError,
    ConfigError,
    DeadlineExceededError,
    NoRouteError,
    OverBudgetError,
    PolicyRouterError,
    RateLimitedError,
    RefusedError,
    ResponseFailedError,
    RouterClosedError,
    StoreUnavailableError,
)
from .ground.money import Money, Usage
from .ground.reach import Reach
from .ground.records import Check, Skip
from .ground.route import Route
from .observe.metrics import (
    DuckDBMetrics,
    MetricRow,
    MetricsSchemaError,
    MetricsStore,
    PostgresMetrics,
    SQLiteMetrics,
)
from .observe.observers import AttemptLog, LogObserver, read_attempts, read_skips
from .policies.accounts import BudgetThreshold
from .policies.breaker import Breaker, RestClosed, RestOpened
from .policies.budget import Budget, Spending
from .policies.capabilities import Capabilities
from .policies.hedge import Hedge
from .policies.order import Fastest, Order, OrderContext, Ordering
from .policies.orderings import register_ordering, unregister_ordering
from .policies.price_table import PriceTable
from .policies.prices import Price
from .policies.requirements import Requirements
from .policies.retry import Retry, RetryContext
from .policies.score import RouteScore, Score
from .router import Router
from .state.memory import InMemoryStore
from .state.redis.store import RedisStore
from .state.sqlite import SQLiteStore
from .state.store import Health, Store, StoreBack, StoreLost
from .state.windows import Window

# Quiet by default: LiteLLM users already have plenty of output.
# `from loguru import logger; logger.enable("policy_router")` turns the lines on.
_logger.disable("policy_router")

__all__ = [
    "AllRestingError",
    "AsyncRoutedStream",
    "Attempt",
    "AttemptLog",
    "Breaker",
    "Budget",
    "BudgetThreshold",
    "Capabilities",
    "Capability",
    "Changes",
    "Check",
    "Clock",
    "ConfigError",
    "DeadlineExceededError",
    "DuckDBMetrics",
    "Explanation",
    "Fastest",
    "Health",
    "Hedge",
    "InMemoryStore",
    "IncompleteResponseWarning",
    "Journey",
    "LogObserver",
    "ManualClock",
    "MetricRow",
    "MetricsSchemaError",
    "MetricsStore",
    "Money",
    "MonotonicClock",
    "NoRouteError",
    "Order",
    "OrderContext",
    "Ordering",
    "OverBudgetError",
    "PolicyRouterError",
    "PostgresMetrics",
    "PreflightVerdict",
    "Price",
    "PriceTable",
    "RateLimitedError",
    "Reach",
    "Reconfigured",
    "RedisStore",
    "RefusedError",
    "Requirements",
    "ResponseFailedError",
    "RestClosed",
    "RestOpened",
    "Retry",
    "RetryContext",
    "Route",
    "RouteScore",
    "Routed",
    "RoutedStream",
    "Router",
    "RouterClosedError",
    "SQLiteMetrics",
    "SQLiteStore",
    "Score",
    "Skip",
    "Spending",
    "Store",
    "StoreBack",
    "StoreLost",
    "StoreUnavailableError",
    "StreamRestart",
    "UncheckedStreamWarning",
    "Usage",
    "Verdict",
    "Waited",
    "Window",
    "read_attempts",
    "read_skips",
    "register_ordering",
    "unregister_ordering",
]


def _show_as_public(names: list[str]) -> None:
    """A public name shows where a user imports it from: a traceback says
    `policy_router.NoRouteError`, not the private module that defines it (as httpx does).
    A class's annotations are strings (PEP 563) that `typing.get_type_hints` reads in the
    module `__module__` names: each is resolved in its own module first, so they still read."""
    for name in names:
        public = globals()[name]
        home = getattr(public, "__module__", "")
        if not home.startswith("policy_router."):
            continue
        if isinstance(public, type) and "__annotations__" in public.__dict__:
            scope = vars(_sys.modules[home])
            for field, text in list(public.__annotations__.items()):
                # A name only type checkers import cannot be resolved: left as written.
                with _suppress(Exception):
                    if isinstance(text, str):
                        public.__annotations__[field] = eval(text, scope, dict(vars(public)))
        public.__module__ = "policy_router"


_show_as_public(__all__)
del _show_as_public
