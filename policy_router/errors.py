"""The exceptions this package raises, and when.

When the router *sent* a request and every route it tried failed, it raises the last
provider's own LiteLLM exception, of its own class, so `except litellm.RateLimitError`
keeps working; the journey is attached as `exc.journey` and written into the exception's
PEP 678 notes. The tree below covers what the router decides on its own:

    PolicyRouterError                 base of everything raised by this package's policy
    ├── ConfigError (ValueError)      bad configuration or bad call arguments; nothing sent
    ├── NoRouteError (LookupError)    no route could serve the request; nothing sent
    │   ├── OverBudgetError           every route that could serve was refused by the budget
    │   └── AllRestingError           every route that could serve is resting (transient)
    ├── DeadlineExceededError (TimeoutError)   the request's deadline passed
    ├── RefusedError                  a provider refused the work on content policy
    └── StoreUnavailableError (ConnectionError)   a shared store (Redis) cannot be reached

A request is never failed by `StoreUnavailableError`: the budget then refuses its routes
("budget store unreachable", an `OverBudgetError`) and health falls back to this process's
own view. It is raised only where the store's answer itself was asked for, such as
`router.spending()`.

Every error except `ConfigError` carries the request's `journey` (which may be None only
when the request never reached a decision).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .journey import Journey

__all__ = [
    "AllRestingError",
    "ConfigError",
    "DeadlineExceededError",
    "NoRouteError",
    "OverBudgetError",
    "PolicyRouterError",
    "RefusedError",
    "StoreUnavailableError",
]


class PolicyRouterError(Exception):
    """Base class of the errors this package's own policy raises.

    It does not catch the LiteLLM exceptions the router re-raises after real attempts
    failed; catch those as you would without the router.
    """

    journey: Journey | None

    def __init__(self, message: str, *, journey: Journey | None = None) -> None:
        super().__init__(message)
        self.journey = journey


class ConfigError(PolicyRouterError, ValueError):
    """A route, a policy, a file or a call's arguments are wrong; nothing was sent.

    The message names the field and the fix.
    """


class NoRouteError(PolicyRouterError, LookupError):
    """No route could serve the request, so nothing was sent.

    The message and `journey.skips` say what each route lacked.
    """


class OverBudgetError(NoRouteError):
    """The budget refused every route that could otherwise serve; nothing was sent."""


class AllRestingError(NoRouteError):
    """Every route that could serve is resting after failures; transient.

    `wakes_in` is how many seconds until the first of them may be tried again.
    """

    wakes_in: float

    def __init__(self, message: str, *, wakes_in: float, journey: Journey | None = None) -> None:
        super().__init__(message, journey=journey)
        self.wakes_in = wakes_in


class DeadlineExceededError(PolicyRouterError, TimeoutError):
    """The request's deadline passed before any route answered.

    `elapsed` is the time spent, in seconds, on the router's clock.
    """

    elapsed: float

    def __init__(self, message: str, *, elapsed: float, journey: Journey | None = None) -> None:
        super().__init__(message, journey=journey)
        self.elapsed = elapsed


class RefusedError(PolicyRouterError):
    """A provider refused the work on content policy; the router did not ask another.

    Asking the next model would be shopping a policy decision around. The provider's own
    LiteLLM exception is `provider_error` (and the `__cause__`).
    """

    provider_error: BaseException | None

    def __init__(
        self,
        message: str,
        *,
        provider_error: BaseException | None = None,
        journey: Journey | None = None,
    ) -> None:
        super().__init__(message, journey=journey)
        self.provider_error = provider_error


class StoreUnavailableError(PolicyRouterError, ConnectionError):
    """The shared store could not be reached, or answered too late.

    The message names the store by its address without its password. Nothing that
    depended on the store's answer happened.
    """
