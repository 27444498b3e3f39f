"""policy_router: decide which provider answers an LLM request, over LiteLLM, and say why.

The public names are re-exported here; everything else is private to the package.
"""

from loguru import logger as _logger

from .breaker import Breaker, RestClosed, RestOpened
from .budget import Budget, Spending
from .capabilities import Capabilities, Capability
from .clock import Clock, ManualClock, MonotonicClock
from .errors import (
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
from .journey import Attempt, Check, Explanation, Journey, Routed, Skip, Verdict, Waited
from .limits import Window
from .observe import AttemptLog, LogObserver, read_attempts, read_skips
from .order import Fastest, Order, OrderContext, Ordering
from .preflight import Verdict as PreflightVerdict
from .prices import Money, Price, PriceTable, Usage
from .redis_store import RedisStore
from .requirements import Requirements
from .retry import Retry
from .route import Reach, Route
from .router import Router
from .store import Health, InMemoryStore, Store, StoreBack, StoreLost
from .stream import AsyncRoutedStream, RoutedStream, StreamRestart

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
