"""Calls to LiteLLM: one attempt is one request, with LiteLLM's own retries and fallbacks off.

Every call goes out with `num_retries=0`, `max_retries=0` and never `fallbacks`, so one
attempt in a journey is one request on the wire; the route's kwargs are defaults and the
call's win. The drive part's other modules ask LiteLLM what a model is (`model_info`), what
a failure means (`failures`) and which credentials are missing (`credentials`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any

import httpx
import litellm

from ...core.checkpoint import Checkpoint, proxied
from ...ground.outcome import Fault, FaultKind, StopAtWire, Wire, WireRefusal
from ...ground.route import Route
from . import guard
from .listeners import callbacks_registered
from .unlogged import bases_of, check_before

if TYPE_CHECKING:
    from ...core.gate import Send
    from ...core.plan import Plan

__all__ = ["NO_RETRIES", "acall", "asend", "call", "send"]


class _NoRetries(int):
    """Zero retries that survive LiteLLM's `max_retries or litellm.DEFAULT_MAX_RETRIES`.

    LiteLLM's OpenAI embedding path (litellm 1.110.2, `llms/openai/openai.py`) reads an
    explicit `max_retries=0` as "unset" because 0 is falsy, and the OpenAI client then
    retried twice: three requests per failed embedding, measured here. This zero is truthy,
    so it reaches the client, which counts it as the 0 it equals.
    """

    def __bool__(self) -> bool:
        return True


NO_RETRIES = _NoRetries(0)


def _kwargs(
    route: Route,
    kwargs: Mapping[str, Any],
    group: str,
    timeout: float | None = None,
    request_id: str = "",
    attempt: int = 0,
    wire: Wire | None = None,
) -> dict[str, Any]:
    # The route's kwargs are defaults and the call's win, as with LiteLLM's Router
    # (`litellm_params` first, then the call's own). A caller cannot override where the
    # call goes or its credentials: `validate.REFUSED_KWARGS` refuses those.
    merged = route.kwargs.copy()  # the read-only view's own dict, copied in one step
    merged.update(kwargs)
    merged["model"] = route.model
    merged["num_retries"] = 0
    merged["max_retries"] = NO_RETRIES
    if timeout is not None:
        # The deadline's length caps each attempt's timeout (the route's, the call's, or
        # one made of it).
        given = merged.get("timeout")
        if isinstance(given, httpx.Timeout):
            merged["timeout"] = httpx.Timeout(
                **{
                    part: (timeout if (v := getattr(given, part)) is None else min(v, timeout))
                    for part in ("connect", "read", "write", "pool")
                }
            )
        elif isinstance(given, int | float) and not isinstance(given, bool):
            merged["timeout"] = min(given, timeout)
        else:
            merged["timeout"] = timeout
    given = merged.get("metadata")
    if isinstance(given, dict):
        # LiteLLM writes into the metadata dict it is given (the answer's hidden params, with
        # the journey in them, and its timing windows): a copy leaves the caller's as passed,
        # so a dict reused call after call neither grows nor carries one call into the next.
        merged["metadata"] = dict(given)
    # Label the call for the user's own LiteLLM callbacks, which see every attempt: the
    # route, the group, the request's id (its journey's) and which attempt of it this is.
    # Only when some are registered: LiteLLM spends ~0.17 ms a call (3%) handling metadata.
    if callbacks_registered():
        metadata = dict(merged.get("metadata") or {})
        metadata["policy_router"] = {
            "route": route.name,
            "group": group,
            "request_id": request_id,
            "attempt": attempt,
        }
        merged["metadata"] = metadata
    if wire is not None:
        # LiteLLM calls `logger_fn` just before it hands the request to a provider: the one
        # seam every provider path passes, SDK-based ones included (see `Wire`).
        user = merged.get("logger_fn")
        wire.user = user if callable(user) else None
        merged["logger_fn"] = wire.saw
    return merged


def call(
    function: str,
    route: Route,
    kwargs: Mapping[str, Any],
    group: str,
    timeout: float | None = None,
    *,
    request_id: str = "",
    attempt: int = 0,
    wire: Wire | None = None,
) -> Any:
    """One request through LiteLLM's `function` (`completion`, `embedding`, `responses`,
    `text_completion`): its own response object or stream.

    `timeout`, when given, caps the call's own (see `_kwargs`). `request_id` and `attempt`
    label the call for LiteLLM's callbacks.
    """
    merged = _kwargs(route, kwargs, group, timeout, request_id, attempt, wire)
    floor = wire is not None and wire.judge is not None and _judged(function, route, merged, wire)
    if floor:
        with guard.on_device(guard.allowed_for(route)):
            return _called(function, merged)
    return _called(function, merged)


def _judged(function: str, route: Route, merged: Mapping[str, Any], wire: Wire) -> bool:
    """A judged attempt checked as far as it can be before the call (a call LiteLLM does
    not log, an on-device attempt's proxies), and whether the floor's guard holds it."""
    check_before(function, route, merged, wire)
    return _on_device(wire, route, merged)


def _called(function: str, merged: dict[str, Any]) -> Any:
    try:
        return getattr(litellm, function)(**merged)
    except StopAtWire as stop:
        # The checkpoint stopped it inside LiteLLM, before the HTTP client was called.
        raise WireRefusal(stop.fault) from None


def _on_device(wire: Wire, route: Route, merged: Mapping[str, Any]) -> bool:
    """Whether the attempt is under the floor; if it is, a proxy a kept client would use
    stops it here (see `guard.kept_proxy`)."""
    judge = wire.judge
    if not (isinstance(judge, Checkpoint) and judge.floor):
        return False
    bases = bases_of(route, merged)
    refused = next((r for b in bases if (r := proxied(b)) is not None), None)
    through = guard.kept_proxy(bases) if refused is None else None
    guard.watch_kept()
    if through is not None:
        refused = Fault(
            FaultKind.ACCESS,
            None,
            f"on_device=True: an HTTP client LiteLLM keeps would carry this request through "
            f"the proxy at {through}, off this machine (it was made while a proxy variable "
            "was set): restart the process, or call "
            "litellm.in_memory_llm_clients_cache.flush_cache()",
            sent=False,
        )
    if refused is not None:
        wire.stopped = refused
        raise WireRefusal(refused)
    return True


def acall(
    function: str,
    route: Route,
    kwargs: Mapping[str, Any],
    group: str,
    timeout: float | None = None,
    *,
    request_id: str = "",
    attempt: int = 0,
    wire: Wire | None = None,
) -> Awaitable[Any]:
    """The async twin of `call`: LiteLLM's async `function` (`acompletion`, ...), to await.

    Its kwargs are made and checked now (a bad one raises here, as `call`'s does). Without
    a checkpoint nothing can stop the request at the wire, so this is LiteLLM's own
    coroutine: no frame of ours between the caller and LiteLLM while it runs."""
    merged = _kwargs(route, kwargs, group, timeout, request_id, attempt, wire)
    if wire is None or wire.judge is None:
        return getattr(litellm, function)(**merged)  # type: ignore[no-any-return]
    return _ajudged(function, route, merged, _judged(function, route, merged, wire))


async def _ajudged(function: str, route: Route, merged: dict[str, Any], floor: bool) -> Any:
    """LiteLLM's call under a checkpoint: its refusal at the wire raised as `WireRefusal`,
    and under the floor with the guard held in this task and the tasks LiteLLM starts."""
    try:
        if floor:
            with guard.on_device(guard.allowed_for(route)):
                return await getattr(litellm, function)(**merged)
        return await getattr(litellm, function)(**merged)
    except StopAtWire as stop:
        raise WireRefusal(stop.fault) from None


def send(function: str, kwargs: Mapping[str, Any], plan: Plan, sent: Send) -> Any:
    """`plan`'s request sent as `sent` says: to its route, within its timeout, labelled for
    LiteLLM's callbacks with the plan's group and id and the attempt's number."""
    return call(
        function,
        sent.route,
        kwargs,
        plan.group,
        sent.timeout,
        request_id=plan.id,
        attempt=sent.attempt,
        wire=sent.wire,
    )


def asend(function: str, kwargs: Mapping[str, Any], plan: Plan, sent: Send) -> Awaitable[Any]:
    """The async twin of `send`: what `acall` returns, to await (no frame of its own)."""
    return acall(
        function,
        sent.route,
        kwargs,
        plan.group,
        sent.timeout,
        request_id=plan.id,
        attempt=sent.attempt,
        wire=sent.wire,
    )
