"""policy_router: decide which provider answers an LLM request, over LiteLLM, and say why.

The public names are re-exported here; everything else is private to the package.
"""

from loguru import logger as _logger

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
from .requirements import Requirements
from .route import Reach, Route
from .router import Router
from .stream import AsyncRoutedStream, RoutedStream

# Quiet by default: LiteLLM users already have plenty of output.
# `from loguru import logger; logger.enable("policy_router")` turns the lines on.
_logger.disable("policy_router")

__all__ = [
    "AllRestingError",
    "AsyncRoutedStream",
    "Attempt",
    "Capabilities",
    "Capability",
    "Check",
    "Clock",
    "ConfigError",
    "DeadlineExceededError",
    "Explanation",
    "Journey",
    "ManualClock",
    "MonotonicClock",
    "NoRouteError",
    "OverBudgetError",
    "PolicyRouterError",
    "Reach",
    "RefusedError",
    "Requirements",
    "Route",
    "Routed",
    "RoutedStream",
    "Router",
    "Skip",
    "Verdict",
]
