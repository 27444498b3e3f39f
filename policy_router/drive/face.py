"""The one call path of a router: a LiteLLM-shaped call read and checked, then driven.

A plain chat call takes the express lane when it can (`Planner.express`, read in one pass);
any other call is prepared in full (`Planner.prepare`) and driven on its lane, or planned
and driven by `drive.calls`. `Router` reads its configuration once per call and hands it
here with the call; a batch is built here too (`batch_of`).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from ..core.journey import Routed
from ..endpoints import endpoint as endpoint_named
from ..ground.clock import Clock
from . import calls
from .batch import Batch, requests_of
from .calls import OnRestart
from .express import Call, Lane
from .planning import Planner

__all__ = ["aroute", "batch_of", "route", "split"]


def route(
    planner: Planner, restart: bool, on_restart: OnRestart,
    endpoint: str, model: str | None, messages: Any, kwargs: dict[str, Any],
) -> Routed[Any]:
    """Route one call of `endpoint` under `planner` (the router's configuration now);
    `restart`/`on_restart` are its streams' `stream_failure="restart"` and hook."""
    lane, call_kwargs, timeout, call = _read(planner, endpoint, model, messages, kwargs)
    if lane is not None:
        return lane.call(call_kwargs, timeout, call, planner, restart, on_restart)
    assert call is not None  # (no lane: the call was read in full)
    return calls.call(planner.build(call), call.endpoint, call_kwargs, restart, on_restart)


def aroute(
    planner: Planner, restart: bool, on_restart: OnRestart,
    endpoint: str, model: str | None, messages: Any, kwargs: dict[str, Any],
) -> Awaitable[Routed[Any]]:
    """The async twin of `route`: the call read and checked now, by the caller's own
    coroutine, and the coroutine that drives it (one frame fewer for every resumption)."""
    lane, call_kwargs, timeout, call = _read(planner, endpoint, model, messages, kwargs)
    if lane is not None:
        return lane.acall(call_kwargs, timeout, call, planner, restart, on_restart)
    assert call is not None
    return calls.acall(planner.build(call), call.endpoint, call_kwargs, restart, on_restart)


def _read(
    planner: Planner, endpoint: str, model: str | None, messages: Any, kwargs: dict[str, Any]
) -> tuple[Lane | None, dict[str, Any], float | None, Call | None]:
    """The call read and checked: the express lane when it takes one, what LiteLLM is to
    get, the call's own timeout, and the `Call` (None for a plain chat call on its lane,
    read in one pass)."""
    lane = planner.express(endpoint, model, messages, kwargs)
    if lane is not None:  # the common call (`Planner.express`)
        return lane, {**kwargs, "messages": messages}, None, None
    call = planner.prepare(endpoint_named(endpoint), model, messages, kwargs)
    return planner.lane(call), call.call_kwargs, call.timeout, call


def batch_of(
    model: str | None,
    messages: Any,
    max_concurrency: int,
    progress: bool,
    kwargs: dict[str, Any],
    clock: Clock,
) -> Batch:
    """The `Batch` of a `batch_completion` call: one request per list of messages, every
    other keyword shared (LiteLLM's `max_workers=` read as `max_concurrency`)."""
    concurrency = kwargs.pop("max_workers", max_concurrency)  # LiteLLM's name for it
    deadline = kwargs.pop("deadline", None)
    return Batch(
        requests_of(messages, kwargs),
        max_concurrency=concurrency,
        deadline=deadline,
        clock=clock,
        progress=progress,
        label=f"batch → {model}",
    )


def split(call: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """A batch request's messages, and the rest of its kwargs."""
    return call["messages"], {k: v for k, v in call.items() if k != "messages"}
