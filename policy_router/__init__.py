"""policy_router: decide which provider answers an LLM request, over LiteLLM, and say why.

The public names are re-exported here; everything else is private to the package.
"""

from loguru import logger as _logger

from .core.journey import Attempt, Check, Explanation, Journey, Routed, Skip, Verdict, Waited
from .drive.preflight import Verdict as PreflightVerdict
from .drive.stream import AsyncRoutedStream, RoutedStream, StreamRestart
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
    StoreUnavailableError,
)
from .ground.route import Reach, Route
from .observe.observers import AttemptLog, LogObserver, read_attempts, read_skips
from .policies.breaker import Breaker, RestClosed, RestOpened
from .policies.budget import Budget, Spending
from .policies.capabilities import Capabilities, Capability
from .policies.limits import Window
from .policies.order import Fastest, Order, OrderContext, Ordering
from .policies.prices import Money, Price, PriceTable, Usage
from .policies.requirements import Requirements
from .policies.retry import Retry
from .router import Router
from .state.redis.store import RedisStore
from .state.store import Health, InMemoryStore, Store, StoreBack, StoreLost

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
    "Capabilities",
    "Capability",
    "Check",
    "Clock",
    "ConfigError",
    "DeadlineExceededError",
    "Explanation",
    "Fastest",
    "Health",
    "InMemoryStore",
    "Journey",
    "LogObserver",
    "ManualClock",
    "Money",
    "MonotonicClock",
    "NoRouteError",
    "Order",
    "OrderContext",
    "Ordering",
    "OverBudgetError",
    "PolicyRouterError",
    "PreflightVerdict",
    "Price",
    "PriceTable",
    "RateLimitedError",
    "Reach",
    "RedisStore",
    "RefusedError",
    "Requirements",
    "RestClosed",
    "RestOpened",
    "Retry",
    "Route",
    "Routed",
    "RoutedStream",
    "Router",
    "Skip",
    "Spending",
    "Store",
    "StoreBack",
    "StoreLost",
    "StoreUnavailableError",
    "StreamRestart",
    "Usage",
    "Verdict",
    "Waited",
    "Window",
    "read_attempts",
    "read_skips",
]
