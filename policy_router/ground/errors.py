"""The exceptions this package raises, and when.

When the router *sent* a request and every route it tried failed, it raises the last
provider's own LiteLLM exception, of its own class, so `except litellm.RateLimitError`
keeps working; the journey is attached as `exc.journey` and written into the exception's
PEP 678 notes. The tree below covers what the router decides on its own:

    PolicyRouterError                 base of everything raised by this package's policy
    ├── ConfigError (ValueError)      bad configuration or bad call arguments; nothing sent
    ├── NoRouteError (LookupError)    no route could serve the request; nothing sent
    │   ├── OverBudgetError           every route that could serve was refused by the budget
    │   ├── AllRestingError           every route that could serve is resting (transient)
    │   └── RateLimitedError          every route that could serve is at its rate limit
    │                                 (also a litellm.RateLimitError; transient)
    ├── DeadlineExceededError         the request's deadline passed
    │                                 (also a litellm.Timeout and a TimeoutError)
    ├── RefusedError                  a provider refused the work on content policy
    │                                 (also a litellm.ContentPolicyViolationError)
    ├── ResponseFailedError           a Responses stream said `response.failed` or `error`
    │                                 (also LiteLLM's MidStreamFallbackError)
    ├── StoreUnavailableError (ConnectionError)   a shared store (Redis) cannot be reached
    └── RouterClosedError             the router was closed; nothing was sent

The three with a LiteLLM twin are that twin too, so code written against LiteLLM
(`except litellm.Timeout:`, `except litellm.RateLimitError:`,
`except litellm.ContentPolicyViolationError:`) still catches them after switching to the
router.

A request is never failed by `StoreUnavailableError`: the budget then refuses its routes
("budget store unreachable", an `OverBudgetError`) and health falls back to this process's
own view. It is raised only where the store's answer itself was asked for, such as
`router.spending()`.

Every error except `ConfigError` carries the request's `journey` (which may be None only
when the request never reached a decision).
"""

from __future__ import annotations

from typing import Any

# LiteLLM's exception classes are its public error surface: subclassing two of them is what
# lets existing `except litellm.X:` clauses keep working. Nothing here calls LiteLLM.
import litellm.exceptions

__all__ = [
    "AllRestingError",
    "ConfigError",
    "DeadlineExceededError",
    "NoRouteError",
    "OverBudgetError",
    "PolicyRouterError",
    "RateLimitedError",
    "RefusedError",
    "ResponseFailedError",
    "RouterClosedError",
    "StoreUnavailableError",
]


class PolicyRouterError(Exception):
    """Base class of the errors this package's own policy raises.

    It does not catch the LiteLLM exceptions the router re-raises after real attempts
    failed; catch those as you would without the router.

    Args:
        message: What happened and, for a configuration error, the fix.
        journey: The request's `Journey` (None when no route was considered), kept as
            `error.journey`; `Journey.of(error)` reads it typed.
    """

    # The request's `policy_router.Journey` (None when no route was considered). Typed
    # loosely because the journey is a record of the decision core, a layer above this one.
    journey: Any

    def __init__(self, message: str, *, journey: Any = None) -> None:
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
    """The budgets refused every route that could otherwise serve; nothing was sent.

    `scope` names the tightest budget that refused (`"all"`, `"user:u-42"`,
    `"key:alice"`, ...: the one with least left), and `resets_at` when its period ends (a
    timezone-aware datetime; None for a budget that never resets): a retry after it may
    fit. The message names every route's refusal, each with its scope, cap and what is
    left."""

    scope: str
    resets_at: Any

    def __init__(self, message: str, *, journey: Any = None, scope: str = "all", resets_at: Any = None) -> None:
        super().__init__(message, journey=journey)
        self.scope = scope
        self.resets_at = resets_at


class AllRestingError(NoRouteError):
    """Every route that could serve is resting after failures; transient.

    `wakes_in` is how many seconds until the first of them may be tried again;
    `last_errors` is each resting route's last error (secrets redacted), by route name,
    and the message names them too.
    """

    wakes_in: float
    last_errors: dict[str, str]

    def __init__(
        self,
        message: str,
        *,
        wakes_in: float,
        journey: Any = None,
        last_errors: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message, journey=journey)
        self.wakes_in = wakes_in
        self.last_errors = dict(last_errors or {})


class RateLimitedError(NoRouteError, litellm.exceptions.RateLimitError):
    """Every route that could serve was at its own rate limit (`rpm`/`tpm`), or closed by a
    provider's 429, so nothing was sent; transient.

    `retry_after` is the seconds until the first of them has room (`inf` when the request
    alone is larger than every route's `tpm`). It is also LiteLLM's `litellm.RateLimitError`
    (status 429, category "litellm_rate_limit"), so a caller's existing backoff on 429s
    keeps working; `Router(wait_for_capacity=True)` waits within the deadline instead.
    """

    retry_after: float

    def __init__(
        self, message: str, *, retry_after: float, journey: Any = None
    ) -> None:
        litellm.exceptions.RateLimitError.__init__(
            self,
            message,
            llm_provider="",
            model="",
            category=litellm.exceptions.RateLimitErrorCategory.LITELLM_RATE_LIMIT,
        )
        self.args = (message,)
        self.journey = journey
        self.retry_after = retry_after

    def __str__(self) -> str:
        return str(self.args[0])

    def __repr__(self) -> str:
        return f"RateLimitedError({self.args[0]!r})"


class DeadlineExceededError(PolicyRouterError, litellm.exceptions.Timeout, TimeoutError):
    """The request's deadline passed before any route answered.

    `elapsed` is the time spent, in seconds, on the router's clock. It is also LiteLLM's
    `litellm.Timeout` (status 408) and Python's `TimeoutError`.
    """

    elapsed: float

    def __init__(
        self, message: str, *, elapsed: float, journey: Any = None, model: str = ""
    ) -> None:
        litellm.exceptions.Timeout.__init__(self, message, model=model, llm_provider="")
        self.args = (message,)
        self.journey = journey
        self.elapsed = elapsed

    def __str__(self) -> str:
        return str(self.args[0])

    def __repr__(self) -> str:
        return f"DeadlineExceededError({self.args[0]!r})"


class RefusedError(PolicyRouterError, litellm.exceptions.ContentPolicyViolationError):
    """A provider refused the work on content policy; the router did not ask another.

    Asking the next model would be shopping a policy decision around. The provider's own
    LiteLLM exception is `provider_error` (and the `__cause__`). It is also LiteLLM's
    `litellm.ContentPolicyViolationError` (status 400), with the provider's `model` and
    `llm_provider`.
    """

    provider_error: BaseException | None

    def __init__(
        self,
        message: str,
        *,
        provider_error: BaseException | None = None,
        journey: Any = None,
    ) -> None:
        litellm.exceptions.ContentPolicyViolationError.__init__(
            self,
            message,
            model=str(getattr(provider_error, "model", "") or ""),
            llm_provider=str(getattr(provider_error, "llm_provider", "") or ""),
        )
        self.args = (message,)
        self.journey = journey
        self.provider_error = provider_error

    def __str__(self) -> str:
        return str(self.args[0])

    def __repr__(self) -> str:
        return f"RefusedError({self.args[0]!r})"


class ResponseFailedError(PolicyRouterError, litellm.exceptions.MidStreamFallbackError):
    """A Responses stream said, in the stream, that the answer failed: a `response.failed`
    event or an `error` event, after the provider had answered 200.

    `event` is that event as the provider sent it (a dict, with the route's secrets
    masked), `code` and `status_code` what it says, `generated_content` the text streamed
    before it. `provider_error` is LiteLLM's own exception for it (also the `__cause__`). It
    is LiteLLM's `MidStreamFallbackError` too, the class LiteLLM raises for such an event, so
    `except litellm.ServiceUnavailableError:` still catches it.
    """

    event: dict[str, Any]
    code: str | None
    provider_error: BaseException | None

    def __init__(
        self,
        message: str,
        *,
        event: dict[str, Any],
        code: str | None = None,
        model: str = "",
        llm_provider: str = "",
        provider_error: BaseException | None = None,
        generated_content: str = "",
        journey: Any = None,
    ) -> None:
        litellm.exceptions.MidStreamFallbackError.__init__(
            self,
            message,
            model=model,
            llm_provider=llm_provider,
            original_exception=provider_error if isinstance(provider_error, Exception) else None,
            generated_content=generated_content,
        )
        self.args = (message,)
        self.journey = journey
        self.event = event
        self.code = code
        self.provider_error = provider_error

    def __str__(self) -> str:
        return str(self.args[0])

    def __repr__(self) -> str:
        return f"ResponseFailedError({self.args[0]!r})"


class StoreUnavailableError(PolicyRouterError, ConnectionError):
    """The shared store could not be reached, or answered too late.

    The message names the store by its address without its password. Nothing that
    depended on the store's answer happened.
    """


class RouterClosedError(PolicyRouterError):
    """The router was closed (`close()`, `aclose()`, the end of its `with` block): it sends
    nothing and reads no store any more. Build a new router to go on."""
