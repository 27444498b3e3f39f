"""policy_router: decide which provider answers an LLM request, over LiteLLM, and say why.

The public names are re-exported here; everything else is private to the package.
"""

from loguru import logger as _logger

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
    RefusedError,
)
from .journey import Attempt, Check, Explanation, Journey, Routed, Skip, Verdict
from .order import Order, OrderContext, Ordering
from .prices import Money, Price, PriceTable, Usage
from .requirements import Requirements
from .route import Reach, Route
from .router import Router
from .store import InMemoryStore, Store
from .stream import AsyncRoutedStream, RoutedStream

# Quiet by default: LiteLLM users already have plenty of output.
# `from loguru import logger; logger.enable("policy_router")` turns the lines on.
_logger.disable("policy_router")

__all__ = [
    "AllRestingError",
    "AsyncRoutedStream",
    "Attempt",
    "Budget",
    "Capabilities",
    "Capability",
    "Check",
    "Clock",
    "ConfigError",
    "DeadlineExceededError",
    "Explanation",
    "InMemoryStore",
    "Journey",
    "ManualClock",
    "Money",
    "MonotonicClock",
    "NoRouteError",
    "Order",
    "OrderContext",
    "Ordering",
    "OverBudgetError",
    "PolicyRouterError",
    "Price",
    "PriceTable",
    "Reach",
    "RefusedError",
    "Requirements",
    "Route",
    "Routed",
    "RoutedStream",
    "Router",
    "Skip",
    "Spending",
    "Store",
    "Usage",
    "Verdict",
]
